//! The broker's answers to RocketMQ's monitoring requests, which `mqadmin` and the RocketMQ
//! dashboard send unchanged: GET_TOPIC_STATS_INFO (`topicStatus`), GET_CONSUME_STATS
//! (`consumerProgress`), GET_CONSUMER_CONNECTION_LIST, GET_PRODUCER_CONNECTION_LIST and
//! GET_BROKER_RUNTIME_INFO (`brokerStatus`). A
//! NameServer and a one-node group in process (harness `t40_cluster`), the SDK's producer, push
//! consumer and admin.
//!
//! - t55 (queryCq): QUERY_CONSUME_QUEUE lists one queue's units from an index with their CommitLog
//!   offsets and tag hashes, and for an online group whether each passes its subscription.
//! - t55: after sends and a consumer that read everything, the topic's queues report their offsets
//!   and last store times, the group's progress reports no lag and a pull rate,
//!   QUERY_CONSUME_TIME_SPAN gives the caught-up group each queue's last store time and no delay
//!   (a group without offsets stands at the first message and waits on it; an unknown topic is
//!   TOPIC_NOT_EXIST), the connection
//!   lists name the clients, and GET_BROKER_RUNTIME_INFO counts the messages in and out; unknown
//!   topics and groups get Java's codes. GET_BROKER_CONFIG (`getBrokerConfig`) lists the config
//!   under RocketMQ's key names as properties text, the admin token masked; QUERY_TOPIC_CONSUME_BY_WHO
//!   names the topic's subscribed groups and the groups with an offset in it (DELETE_SUBSCRIPTIONGROUP
//!   keeps a group's offsets unless `removeOffset`); VIEW_BROKER_STATS_DATA
//!   answers the statistics a send and a pull count, and Java's error for one never counted;
//!   GET_BROKER_CONSUME_STATS (`brokerConsumeStats`) lists every group's progress and the total lag.

use crate::harness;

use std::time::Duration;

use anyhow::Context;
use anyhow::Result;
use anyhow::ensure;
use harness::cluster::Cluster;
use harness::cluster::Collector;
use harness::cluster::WAIT;
use harness::cluster::now_ms;
use harness::cluster::until;
use raftmq_client::Admin;
use raftmq_client::Producer;
use raftmq_client::PushConsumer;
use raftmq_client::consumer::ConsumeConcurrentlyContext;
use raftmq_client::consumer::ConsumeConcurrentlyStatus;
use raftmq_client::consumer::ConsumeFrom;
use raftmq_common::message::Message;
use raftmq_common::message::MessageExt;
use raftmq_common::message::OffsetMsgId;
use raftmq_common::message::tag::tags_code;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::JsonBody;
use raftmq_common::protocol::body::heartbeat::ConsumerData;
use raftmq_common::protocol::body::heartbeat::HeartbeatData;
use raftmq_common::protocol::body::heartbeat::MessageModel;
use raftmq_common::protocol::body::heartbeat::ProducerData;
use raftmq_common::protocol::body::heartbeat::SubscriptionData;
use raftmq_common::protocol::body::register::TopicList;
use raftmq_common::protocol::body::subscription_group::SubscriptionGroupConfig;
use raftmq_common::protocol::body::topic::TopicConfig;
use raftmq_common::remoting::RemotingClient;

const TOPIC: &str = "T55Stats";
const CONSUMERS: &str = "t55-consumers";
const PRODUCERS: &str = "t55-producers";

/// The RocketMQ dashboard's topic list: GET_SYSTEM_TOPIC_LIST_FROM_NS names the clusters and groups
/// and a broker to ask, whose GET_SYSTEM_TOPIC_LIST_FROM_BROKER lists the topics it made itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn system_topics_are_listed_as_the_dashboard_asks() -> Result<()> {
    let cluster = Cluster::start(1).await?;
    let leader = cluster.wait_leader(WAIT).await?;
    let client = RemotingClient::new();
    let config = &cluster.configs[&leader];
    // A ready leader registers with the NameServer right after it becomes ready, not before:
    // ask until the registration has landed.
    let from_ns = until(
        "the NameServer to know the group",
        || async {
            let request = RemotingCommand::request(RequestCode::GetSystemTopicListFromNs);
            let r = client.invoke(&cluster.namesrv_addr, request, WAIT).await?;
            ensure!(r.response_code() == ResponseCode::Success, "{:?}", r.remark);
            Ok(TopicList::decode(&r.body)?)
        },
        |l| l.broker_addr.is_some(),
    )
    .await?;
    ensure!(
        from_ns.topic_list.contains(&config.broker_cluster_name) && from_ns.topic_list.contains(&config.broker_name),
        "{from_ns:?}"
    );
    let broker = from_ns.broker_addr.context("no broker address to ask")?;
    ensure!(broker == cluster.addr(leader), "{broker} is not the leader {}", cluster.addr(leader));
    let request = RemotingCommand::request(RequestCode::GetSystemTopicListFromBroker);
    let r = client.invoke(&broker, request, WAIT).await?;
    ensure!(r.response_code() == ResponseCode::Success, "{:?}", r.remark);
    let from_broker = TopicList::decode(&r.body)?.topic_list;
    for topic in ["TBW102", "SCHEDULE_TOPIC_XXXX", "OFFSET_MOVED_EVENT", "SELF_TEST_TOPIC", "BenchmarkTest"] {
        ensure!(from_broker.contains(topic), "{topic} missing from {from_broker:?}");
    }
    ensure!(!from_broker.contains("RMQ_SYS_TRANS_HALF_TOPIC"), "Java lists only the topics made at start");
    cluster.shutdown().await
}

/// `mqadmin queryCq` (QUERY_CONSUME_QUEUE): the units of one queue from an index, each pointing
/// at its message's CommitLog offset with its tag's hash; with a group that is online, whether each
/// unit passes its subscription; an index outside the queue and an unknown queue answered as Java.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consume_queue_units_are_listed_as_query_cq_asks() -> Result<()> {
    const CQ_TOPIC: &str = "T55Cq";
    let cluster = Cluster::start(1).await?;
    cluster.create_topic(CQ_TOPIC, 1).await?;
    let addr = cluster.addr(cluster.wait_leader(WAIT).await?);
    let admin = Admin::new(&cluster.namesrv_addr)?;
    let producer = Producer::builder(PRODUCERS).namesrv_addr(&cluster.namesrv_addr).build()?;
    producer.start().await?;
    let mut sent = Vec::new();
    for i in 0..5 {
        let tag = if i % 2 == 0 { "TagA" } else { "TagB" };
        let r = producer.send(Message::new(CQ_TOPIC, format!("m{i}").into_bytes()).with_tags(tag)).await?;
        ensure!(r.queue_offset == i, "{r:?}");
        sent.push((r.offset_msg_id.parse::<OffsetMsgId>()?.commit_log_offset, tags_code(Some(tag))));
    }
    producer.shutdown().await;

    let (body, remark) = admin.query_consume_queue(&addr, CQ_TOPIC, 0, 1, 3, None).await?;
    ensure!((body.min_queue_index, body.max_queue_index) == (0, 5), "{body:?}");
    ensure!(body.subscription_data.is_none() && body.filter_data.is_none() && remark.is_none(), "{body:?}");
    let units: Vec<(i64, i64)> = body.queue_data.iter().map(|u| (u.physic_offset, u.tags_code)).collect();
    ensure!(units == sent[1..4], "{units:?} against {sent:?}");
    ensure!(body.queue_data.iter().all(|u| u.physic_size > 0 && !u.eval && u.msg.is_none()), "{body:?}");
    // Past the end the list stops at the queue's last unit.
    let (body, _) = admin.query_consume_queue(&addr, CQ_TOPIC, 0, 3, 100, None).await?;
    ensure!(body.queue_data.len() == 2, "{body:?}");

    // A group that subscribed to TagA (a consumer's heartbeat): each unit says whether it passes.
    let subscription = SubscriptionData {
        topic: CQ_TOPIC.into(),
        sub_string: "TagA".into(),
        tags_set: vec!["TagA".into()],
        code_set: vec![tags_code(Some("TagA")) as i32],
        ..SubscriptionData::default()
    };
    let heartbeat = HeartbeatData {
        client_id: "127.0.0.1@t55-cq".into(),
        consumer_data_set: vec![ConsumerData {
            group_name: "t55-cq".into(),
            subscription_data_set: vec![subscription.clone()],
            ..ConsumerData::default()
        }],
        producer_data_set: Vec::new(),
    };
    let client = RemotingClient::new();
    let request = RemotingCommand::request(RequestCode::HeartBeat).with_body(heartbeat.encode()?);
    let answer = client.invoke(&addr, request, WAIT).await?;
    ensure!(answer.response_code() == ResponseCode::Success, "{answer:?}");
    let (body, _) = admin.query_consume_queue(&addr, CQ_TOPIC, 0, 0, 10, Some("t55-cq")).await?;
    ensure!(body.subscription_data.as_ref().map(|s| s.sub_string.as_str()) == Some("TagA"), "{body:?}");
    let eval: Vec<bool> = body.queue_data.iter().map(|u| u.eval).collect();
    ensure!(eval == [true, false, true, false, true], "{eval:?}");
    let (body, _) = admin.query_consume_queue(&addr, CQ_TOPIC, 0, 0, 1, Some("t55-nobody")).await?;
    ensure!(body.filter_data.as_deref() == Some("t55-nobody@T55Cq is not online!"), "{body:?}");

    // Outside the queue: SUCCESS, no units, Java's remark; an unknown queue: SYSTEM_ERROR.
    let (body, remark) = admin.query_consume_queue(&addr, CQ_TOPIC, 0, 7, 3, None).await?;
    ensure!(body.queue_data.is_empty() && body.max_queue_index == 5, "{body:?}");
    ensure!(remark.as_deref() == Some("Index 7 of 0@T55Cq is not exist!"), "{remark:?}");
    let unknown = admin.query_consume_queue(&addr, CQ_TOPIC, 3, 0, 3, None).await.err();
    // A queue of a topic that stored nothing yet is empty, not unknown.
    cluster.create_topic("T55CqEmpty", 2).await?;
    let (body, remark) = admin.query_consume_queue(&addr, "T55CqEmpty", 1, 0, 3, None).await?;
    ensure!(body.queue_data.is_empty() && (body.min_queue_index, body.max_queue_index) == (0, 0), "{body:?}");
    ensure!(remark.as_deref() == Some("Index 0 of 1@T55CqEmpty is not exist!"), "{remark:?}");
    ensure!(unknown.as_ref().and_then(|e| e.response_code()) == Some(ResponseCode::SystemError), "{unknown:?}");
    ensure!(unknown.is_some_and(|e| e.to_string().contains("3@T55Cq is not exist!")));
    admin.shutdown().await;
    cluster.crash_all().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topic_and_consumer_progress_and_connections_are_reported() -> Result<()> {
    let cluster = Cluster::start_with(1, |c| c.admin_token = Some("t55-secret-0123456789".into())).await?;
    cluster.create_topic(TOPIC, 2).await?;
    let addr = cluster.addr(cluster.wait_leader(WAIT).await?);
    let admin = Admin::new(&cluster.namesrv_addr)?;

    let unknown = admin.topic_stats(&addr, "T55NoSuchTopic").await.err().and_then(|e| e.response_code());
    ensure!(unknown == Some(ResponseCode::TopicNotExist), "{unknown:?}");
    let empty = admin.topic_stats(&addr, TOPIC).await?;
    ensure!(empty.offset_table.len() == 2, "{empty:?}");
    ensure!(empty.offset_table.values().all(|o| o.max_offset == 0 && o.last_update_timestamp == 0), "{empty:?}");

    let before = now_ms();
    let producer = Producer::builder(PRODUCERS).namesrv_addr(&cluster.namesrv_addr).build()?;
    producer.start().await?;
    for i in 0..7 {
        producer.send(Message::new(TOPIC, format!("m{i}").into_bytes())).await?;
    }
    let stats = admin.topic_stats(&addr, TOPIC).await?;
    let total: i64 = stats.offset_table.values().map(|o| o.max_offset - o.min_offset).sum();
    ensure!(total == 7, "{stats:?}");
    for (mq, o) in &stats.offset_table {
        ensure!(mq.broker_name == harness::cluster::BROKER_NAME && mq.topic == TOPIC, "{mq:?}");
        if o.max_offset > 0 {
            ensure!(o.last_update_timestamp >= before && o.last_update_timestamp <= now_ms(), "{mq:?}: {o:?}");
        } else {
            ensure!(o.last_update_timestamp == 0, "{mq:?}: {o:?}");
        }
    }

    let seen = Collector::default();
    let sink = seen.clone();
    let consumer = PushConsumer::builder(CONSUMERS)
        .namesrv_addr(&cluster.namesrv_addr)
        .instance_name("t55")
        .subscribe(TOPIC, "*")
        .consume_from(ConsumeFrom::FirstOffset)
        .persist_interval(Duration::from_millis(200))
        .heartbeat_interval(Duration::from_millis(500))
        .listener_concurrently(move |msgs: &[MessageExt], _ctx: &mut ConsumeConcurrentlyContext| {
            sink.record("c", msgs);
            ConsumeConcurrentlyStatus::ConsumeSuccess
        })
        .build()?;
    consumer.start().await?;
    seen.wait_until("all seven", |r| r.len() >= 7).await?;

    let progress = until(
        "the group's offsets to reach the queues' ends",
        || async { Ok(admin.consume_stats(&addr, CONSUMERS, None).await?) },
        |s| {
            let mine: Vec<_> = s.offset_table.iter().filter(|(mq, _)| mq.topic == TOPIC).collect();
            mine.len() == 2 && mine.iter().all(|(_, w)| w.consumer_offset == w.broker_offset)
        },
    )
    .await?;
    ensure!(progress.compute_total_diff() == 0, "{progress:?}");
    ensure!(progress.consume_tps > 0.0, "seven messages pulled within the last minute: {progress:?}");
    for (mq, w) in progress.offset_table.iter().filter(|(mq, _)| mq.topic == TOPIC) {
        let stored = stats.offset_table.get(mq).map(|o| o.last_update_timestamp);
        let expected = if w.consumer_offset > 0 { stored } else { Some(0) };
        ensure!(Some(w.last_timestamp) == expected, "{mq:?}: {w:?}, topic stats {stored:?}");
    }
    let one_topic = admin.consume_stats(&addr, CONSUMERS, Some(TOPIC)).await?;
    ensure!(one_topic.offset_table.keys().all(|mq| mq.topic == TOPIC) && one_topic.offset_table.len() == 2);

    // QUERY_CONSUME_TIME_SPAN: the group is caught up, so it last consumed each queue's last message
    // and nothing waits; a group without offsets stands at each queue's first message.
    let spans = admin.consume_time_span(&addr, TOPIC, CONSUMERS).await?;
    ensure!(spans.len() == 2, "{spans:?}");
    for span in &spans {
        let last = stats.offset_table.get(&span.message_queue).map(|o| o.last_update_timestamp).context("a queue")?;
        if last > 0 {
            ensure!(span.max_time_stamp == last && span.consume_time_stamp == last, "{span:?}, last {last}");
            ensure!(0 < span.min_time_stamp && span.min_time_stamp <= last, "{span:?}");
        } else {
            ensure!(span.max_time_stamp == -1 && span.min_time_stamp == -1, "an empty queue: {span:?}");
        }
        ensure!(span.delay_time == 0, "caught up: {span:?}");
    }
    let fresh = admin.consume_time_span(&addr, TOPIC, "t55-no-offsets").await?;
    // Its delay is the age of each queue's first message (Java would say now + 1).
    ensure!(fresh.iter().all(|s| s.consume_time_stamp == s.min_time_stamp && s.delay_time >= 0), "{fresh:?}");
    let e = admin.consume_time_span(&addr, "T55_NO_SUCH_TOPIC", CONSUMERS).await.expect_err("no topic");
    ensure!(e.to_string().contains("not exist"), "{e}");

    // GET_BROKER_CONSUME_STATS (`mqadmin brokerConsumeStats`): every group's progress on the broker.
    let all = admin.broker_consume_stats(&addr, false).await?;
    ensure!(all.broker_addr == addr, "{all:?}");
    let mine = all.consume_stats_list.iter().find_map(|m| m.get(CONSUMERS)).context("the group is listed")?;
    let topic_stats = mine.iter().find(|s| s.offset_table.keys().any(|mq| mq.topic == TOPIC)).context("its topic")?;
    ensure!(topic_stats.offset_table.len() == 2 && topic_stats.compute_total_diff() == 0, "{mine:?}");
    ensure!(all.total_diff == 0, "everything consumed: {all:?}");
    // isOrder: only ordered topics, here one a group has an offset on.
    let ordered_topic = TopicConfig { order: true, ..TopicConfig::new("T55Ordered") };
    admin.create_topic(&addr, &ordered_topic).await?;
    admin.create_subscription_group(&addr, &SubscriptionGroupConfig::new("t55-ordered")).await?;
    admin.update_consumer_offset(&addr, "t55-ordered", "T55Ordered", 0, 0).await?;
    let ordered = admin.broker_consume_stats(&addr, true).await?;
    let listed: Vec<&String> = ordered
        .consume_stats_list
        .iter()
        .flat_map(|m| m.values().flatten())
        .flat_map(|s| s.offset_table.keys().map(|mq| &mq.topic))
        .collect();
    ensure!(!listed.is_empty() && listed.iter().all(|t| *t == "T55Ordered"), "{ordered:?}");

    let connections = admin.consumer_connection(&addr, CONSUMERS).await?;
    ensure!(connections.connection_set.len() == 1, "{connections:?}");
    let c = &connections.connection_set[0];
    ensure!(c.client_id == consumer.client_id() && c.language == "RUST", "{c:?}");
    ensure!(c.client_addr.starts_with("127.0.0.1:"), "{c:?}");
    ensure!(connections.subscription_table.contains_key(TOPIC), "{connections:?}");
    ensure!(connections.message_model == Some(MessageModel::Clustering), "{connections:?}");
    let offline = admin.consumer_connection(&addr, "t55-nobody").await.err().and_then(|e| e.response_code());
    ensure!(offline == Some(ResponseCode::ConsumerNotOnline), "{offline:?}");

    // Producers heartbeat their brokers with their group, as Java's do: the SDK's producer from a
    // task of its own once it used a route, and a Java-like client with one HEART_BEAT here.
    let java_like = RemotingClient::new();
    let heartbeat = HeartbeatData {
        client_id: "127.0.0.1@t55-java".into(),
        consumer_data_set: Vec::new(),
        producer_data_set: vec![ProducerData { group_name: PRODUCERS.into() }],
    };
    let request = RemotingCommand::request(RequestCode::HeartBeat).with_body(heartbeat.encode()?);
    let answer = java_like.invoke(&addr, request, Duration::from_secs(5)).await?;
    ensure!(answer.response_code() == ResponseCode::Success, "{answer:?}");
    let producers = until(
        "both producers' heartbeats",
        || async { Ok(admin.producer_connection(&addr, PRODUCERS).await?) },
        |p| p.connection_set.len() == 2,
    )
    .await?;
    let mut ids: Vec<&str> = producers.connection_set.iter().map(|c| c.client_id.as_str()).collect();
    ids.sort_unstable();
    let mut want = vec!["127.0.0.1@t55-java", producer.client_id()];
    want.sort_unstable();
    ensure!(ids == want, "{producers:?}");
    let no_group = admin.producer_connection(&addr, "t55-nobody").await.err().and_then(|e| e.response_code());
    ensure!(no_group == Some(ResponseCode::SystemError), "{no_group:?}");

    let status = admin.broker_runtime_info(&addr).await?.table;
    let value = |k: &str| status.get(k).cloned().unwrap_or_default();
    ensure!(value("msgPutTotalTodayNow") == "7", "{status:?}");
    ensure!(value("msgGetTotalTodayNow").parse::<u64>()? >= 7, "{status:?}");
    ensure!(value("putTps").split(' ').count() == 3, "{status:?}");
    ensure!(value("brokerVersionDesc") == "V4_9_8" && value("raftRole") == "LEADER", "{status:?}");
    ensure!(value("commitLogMaxOffset").parse::<i64>()? > 0, "{status:?}");
    ensure!(value("raftAppliedIndex").parse::<u64>()? <= value("raftLastLogIndex").parse::<u64>()?, "{status:?}");

    // VIEW_BROKER_STATS_DATA (`mqadmin statsAll`, the dashboard's charts): the seven messages
    // stored and read belong to the current minute; the minute window shows them once its first
    // ten-second sample passed, so only the kinds and the "not exist" answer are checked here.
    let put = admin.view_broker_stats_data(&addr, "TOPIC_PUT_NUMS", TOPIC).await?;
    ensure!(put.stats_minute.tps >= 0.0 && put.stats_day.sum <= 7, "{put:?}");
    admin.view_broker_stats_data(&addr, "GROUP_GET_NUMS", &format!("{TOPIC}@{CONSUMERS}")).await?;
    admin.view_broker_stats_data(&addr, "BROKER_PUT_NUMS", "DefaultCluster").await?;
    let missing = admin.view_broker_stats_data(&addr, "TOPIC_PUT_NUMS", "T55_NOBODY").await.err();
    let missing = missing.context("an uncounted topic has no stats")?;
    ensure!(missing.response_code() == Some(ResponseCode::SystemError), "{missing}");
    ensure!(missing.to_string().contains("not exist"), "{missing}");

    // QUERY_TOPIC_CONSUME_BY_WHO (the dashboard's consumers of a topic): the subscribed group,
    // and a group that only has a committed offset there.
    admin.update_consumer_offset(&addr, "t55-offset-only", TOPIC, 0, 1).await?;
    let groups = admin.topic_consume_by_who(&addr, TOPIC).await?;
    ensure!(groups.contains(CONSUMERS) && groups.contains("t55-offset-only"), "{groups:?}");
    ensure!(admin.topic_consume_by_who(&addr, "T55_NOBODY").await?.is_empty());
    // DELETE_SUBSCRIPTIONGROUP keeps a group's offsets, as Java does, unless `removeOffset`.
    admin.delete_subscription_group(&addr, "t55-offset-only", false).await?;
    let offsets = admin.all_consumer_offset(&addr).await?;
    ensure!(offsets.offset_table.contains_key(&format!("{TOPIC}@t55-offset-only")), "{offsets:?}");
    admin.delete_subscription_group(&addr, "t55-offset-only", true).await?;
    let offsets = admin.all_consumer_offset(&addr).await?;
    ensure!(offsets.offset_table.keys().all(|k| !k.ends_with("@t55-offset-only")), "{offsets:?}");
    ensure!(!offsets.offset_table.is_empty(), "the other groups keep theirs: {offsets:?}");

    // GET_BROKER_CONFIG (`mqadmin getBrokerConfig`): Java properties text and a DataVersion.
    let config = admin.broker_config(&addr).await?;
    let value = |k: &str| config.get(k).cloned().unwrap_or_default();
    ensure!(value("brokerName") == harness::cluster::BROKER_NAME, "{config:?}");
    ensure!(addr.ends_with(&format!(":{}", value("listenPort"))), "{addr} vs {config:?}");
    ensure!(value("brokerClusterName") == "DefaultCluster" && value("autoCreateTopicEnable") == "true", "{config:?}");
    ensure!(value("raftPeers").starts_with("[{") && value("raftPeers").contains(&addr), "{config:?}");
    ensure!(value("adminToken") == "******", "the admin token is never shown: {config:?}");
    ensure!(value("transactionTimeOut") == "6000", "durations in ms, as Java's: {config:?}");
    ensure!(value("brokerId") == "0" && value("brokerRole") == "SYNC_MASTER", "the leader: {config:?}");
    ensure!(value("flushDiskType") == "SYNC_FLUSH", "{config:?}");
    ensure!(!config.values().any(|v| v.contains("t55-secret-0123456789")), "{config:?}");
    let raw =
        java_like.invoke(&addr, RemotingCommand::request(RequestCode::GetBrokerConfig), Duration::from_secs(5)).await?;
    ensure!(raw.response_code() == ResponseCode::Success, "{raw:?}");
    let version = raw.ext_fields.get("version").map(|v| v.to_string()).unwrap_or_default();
    let version: serde_json::Value = serde_json::from_str(&version)?;
    ensure!(version["counter"] == 0 && version["timestamp"].as_i64() > Some(0), "{version}");
    ensure!(
        std::str::from_utf8(&raw.body)?.lines().any(|l| l == format!("brokerName={}", harness::cluster::BROKER_NAME))
    );

    java_like.close().await;
    consumer.shutdown().await;
    producer.shutdown().await;
    admin.shutdown().await;
    cluster.shutdown().await
}
