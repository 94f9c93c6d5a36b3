//! INVOKE_BROKER_TO_RESET_OFFSET (`mqadmin resetOffsetByTime`) with the group online: the broker
//! commits the new offsets through Raft and pushes RESET_CONSUMER_CLIENT_OFFSET to the group's
//! consumers, which drop what they hold and consume again from the reset point. A NameServer and
//! a one-node group in process (harness `t40_cluster`), the SDK's producer, push consumer and admin.
//!
//! - t56: ten messages, six stored before a time T and four after, all consumed; a reset to T
//!   answers the new table (each queue at its first message stored at or after T), the running
//!   consumer receives exactly the four later messages again, and the group's committed offsets
//!   end at the queues' ends once more. An offline group gets CONSUMER_NOT_ONLINE (and `mqadmin`
//!   falls back), an unknown topic SYSTEM_ERROR with Java's remark.
//! - GET_CONSUMER_RUNNING_INFO (`mqadmin consumerStatus`): the broker relays it to the named client,
//!   whose report names its group, subscription, the two queues it holds at their ends and the
//!   topic's pull and consume rates; a client
//!   that is not connected gets SYSTEM_ERROR; `raftmq admin consumerStatus` prints the same.
//! - INVOKE_BROKER_TO_GET_CONSUMER_STATUS (`mqadmin getConsumerStatus`): the broker asks each
//!   client (GET_CONSUMER_STATUS_FROM_CLIENT) for the offsets it holds, both queues at their ends;
//!   a group with no client online gets SYSTEM_ERROR; `raftmq admin getConsumerStatus` prints them.
//! - CONSUME_MESSAGE_DIRECTLY (`mqadmin queryMsgById -g -d`): the broker sends the stored message
//!   to the client, its listener takes it once more and the answer says CR_SUCCESS; a bad msgId
//!   gets SYSTEM_ERROR.
//! - CLONE_GROUP_OFFSET (`mqadmin cloneGroupOffset`), SDK and CLI: one group's offsets copied to
//!   another, through Raft; GET_BROKER_CONSUME_STATS (`brokerConsumeStats`), SDK and CLI: the
//!   subscription groups' progress and the broker's total lag.

use crate::harness;

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context;
use anyhow::Result;
use anyhow::ensure;
use harness::cluster::BROKER_NAME;
use harness::cluster::Cluster;
use harness::cluster::Collector;
use harness::cluster::WAIT;
use harness::cluster::now_ms;
use harness::cluster::until;
use raftmq_client::Admin;
use raftmq_client::Producer;
use raftmq_client::PullConsumer;
use raftmq_client::PushConsumer;
use raftmq_client::consumer::ConsumeConcurrentlyContext;
use raftmq_client::consumer::ConsumeConcurrentlyStatus;
use raftmq_client::consumer::ConsumeFrom;
use raftmq_common::message::Message;
use raftmq_common::message::MessageExt;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::consume_directly::CmResult;
use raftmq_common::protocol::body::consumer_running_info::PROP_CONSUME_TYPE;
use raftmq_common::protocol::body::subscription_group::SubscriptionGroupConfig;

const TOPIC: &str = "T56Reset";
const GROUP: &str = "t56-consumers";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_running_info_and_direct_consumption_reach_a_running_consumer() -> Result<()> {
    let cluster = Cluster::start(1).await?;
    cluster.create_topic(TOPIC, 2).await?;
    let addr = cluster.addr(cluster.wait_leader(WAIT).await?);
    let admin = Admin::new(&cluster.namesrv_addr)?;
    let producer = Producer::builder("t56-producers").namesrv_addr(&cluster.namesrv_addr).build()?;
    producer.start().await?;
    for i in 0..6 {
        producer.send(Message::new(TOPIC, format!("before-{i}").into_bytes())).await?;
    }
    // Every earlier message was stored before `t`, every later one at or after it (same clock,
    // millisecond store times): wait for the clock to pass `t`, not for anything under test.
    let t = now_ms() + 1;
    while now_ms() <= t {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let mut last_offset_msg_id = String::new();
    for i in 0..4 {
        last_offset_msg_id = producer.send(Message::new(TOPIC, format!("after-{i}").into_bytes())).await?.offset_msg_id;
    }

    let seen = Collector::default();
    let sink = seen.clone();
    let consumer = PushConsumer::builder(GROUP)
        .namesrv_addr(&cluster.namesrv_addr)
        .instance_name("t56")
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
    seen.wait_until("all ten", |r| r.len() >= 10).await?;
    let ends = |s: &raftmq_common::protocol::body::consume_stats::ConsumeStats| {
        let mine: Vec<_> = s.offset_table.iter().filter(|(mq, _)| mq.topic == TOPIC).collect();
        mine.len() == 2 && mine.iter().all(|(_, w)| w.consumer_offset == w.broker_offset)
    };
    until(
        "the group's offsets at the queues' ends",
        || async { Ok(admin.consume_stats(&addr, GROUP, None).await?) },
        ends,
    )
    .await?;
    let consumed_before_reset = seen.all().len();

    let table = admin.reset_offset_by_time(&addr, TOPIC, GROUP, t, false).await?;
    ensure!(table.len() == 2, "{table:?}");
    let mut rewound = 0;
    for (mq, offset) in &table {
        let searched = admin.search_offset(&addr, TOPIC, mq.queue_id, t).await?;
        ensure!(*offset == searched, "{mq:?}: reset to {offset}, the first offset at or after T is {searched}");
        rewound += admin.max_offset(&addr, TOPIC, mq.queue_id).await? - offset;
    }
    ensure!(rewound == 4, "the four messages stored after T are to be consumed again: {table:?}");

    // The consumer drops its queues, takes them again at the reset offsets and reads the four.
    seen.wait_until("the four later messages again", |r| r.len() >= consumed_before_reset + 4).await?;
    let again: Vec<String> = seen.bodies().split_off(consumed_before_reset);
    let mut distinct: Vec<&str> = again.iter().map(String::as_str).collect();
    distinct.sort_unstable();
    distinct.dedup();
    ensure!(distinct == ["after-0", "after-1", "after-2", "after-3"], "consumed after the reset: {again:?}");
    until(
        "the group's offsets back at the queues' ends",
        || async { Ok(admin.consume_stats(&addr, GROUP, None).await?) },
        ends,
    )
    .await?;

    let offline = admin.reset_offset_by_time(&addr, TOPIC, "t56-nobody", t, true).await.err();
    ensure!(offline.as_ref().and_then(|e| e.response_code()) == Some(ResponseCode::ConsumerNotOnline), "{offline:?}");
    let unknown = admin.reset_offset_by_time(&addr, "T56NoSuchTopic", GROUP, t, true).await.err();
    ensure!(unknown.as_ref().and_then(|e| e.response_code()) == Some(ResponseCode::SystemError), "{unknown:?}");
    ensure!(format!("{unknown:?}").contains("no topic in this broker"), "{unknown:?}");

    // GET_CONSUMER_RUNNING_INFO, relayed by the broker to the client it names.
    let info = admin.consumer_running_info(&addr, GROUP, consumer.client_id(), false).await?;
    ensure!(info.properties.get(PROP_CONSUME_TYPE).map(String::as_str) == Some("CONSUME_PASSIVELY"), "{info:?}");
    ensure!(info.properties.get("consumerGroup").map(String::as_str) == Some(GROUP), "{info:?}");
    ensure!(info.subscription_set.iter().any(|s| s.topic == TOPIC && s.sub_string == "*"), "{info:?}");
    let held: Vec<_> = info.mq_table.iter().filter(|(mq, _)| mq.topic == TOPIC).collect();
    ensure!(held.len() == 2, "both queues held: {info:?}");
    for (mq, q) in held {
        let max = admin.max_offset(&addr, TOPIC, mq.queue_id).await?;
        ensure!(q.commit_offset == max && !q.droped && q.last_pull_timestamp > 0, "{mq:?}: {q:?}");
    }
    // Everything was pulled and consumed within the last minute: the topic's rates are non-zero.
    let rates = info.status_table.get(TOPIC).copied().unwrap_or_default();
    ensure!(rates.pull_tps > 0.0 && rates.consume_ok_tps > 0.0 && rates.consume_failed_tps == 0.0, "{rates:?}");
    ensure!(rates.consume_failed_msgs == 0, "{rates:?}");
    let stranger = admin.consumer_running_info(&addr, GROUP, "127.0.0.1@nobody", false).await.err();
    ensure!(stranger.as_ref().and_then(|e| e.response_code()) == Some(ResponseCode::SystemError), "{stranger:?}");
    ensure!(format!("{stranger:?}").contains("not online"), "{stranger:?}");

    // A lite pull consumer answers too, as one that consumes actively.
    let lite = PullConsumer::builder("t56-lite")
        .namesrv_addr(&cluster.namesrv_addr)
        .instance_name("t56-lite")
        .subscribe(TOPIC, "*")
        .consume_from(ConsumeFrom::FirstOffset)
        .build()?;
    lite.start().await?;
    let mut polled = 0;
    let deadline = tokio::time::Instant::now() + WAIT;
    while polled < 10 {
        ensure!(tokio::time::Instant::now() < deadline, "the lite consumer polled {polled} of 10");
        polled += lite.poll(WAIT).await?.len();
    }
    let lite_info = admin.consumer_running_info(&addr, "t56-lite", lite.client_id(), false).await?;
    ensure!(
        lite_info.properties.get(PROP_CONSUME_TYPE).map(String::as_str) == Some("CONSUME_ACTIVELY"),
        "{lite_info:?}"
    );
    ensure!(lite_info.mq_table.keys().filter(|mq| mq.topic == TOPIC).count() == 2, "{lite_info:?}");
    ensure!(lite_info.subscription_set.iter().any(|s| s.topic == TOPIC), "{lite_info:?}");
    // Its pulls of the last minute, as pull TPS and RT; what `poll` hands over is not seen.
    let lite_rates = lite_info.status_table.get(TOPIC).copied().unwrap_or_default();
    ensure!(lite_rates.pull_tps > 0.0 && lite_rates.consume_ok_tps == 0.0, "{lite_rates:?}");
    lite.shutdown().await;

    // `raftmq admin consumerStatus`, Java's `mqadmin consumerStatus`, over the same requests.
    let status = cli(&["admin", "consumerStatus", "-n", &cluster.namesrv_addr, "-g", GROUP]).await?;
    ensure!(status.contains(consumer.client_id()), "{status}");
    ensure!(
        status.contains("Same subscription in the same group of consumer") && status.contains("Rebalance OK"),
        "{status}"
    );
    let one =
        cli(&["admin", "consumerStatus", "-n", &cluster.namesrv_addr, "-g", GROUP, "-i", consumer.client_id()]).await?;
    ensure!(
        one.contains("#Consumer Properties#")
            && one.contains("CONSUME_PASSIVELY")
            && one.contains("#Consumer RT&TPS#")
            && one.contains(TOPIC),
        "{one}"
    );
    let json: serde_json::Value = serde_json::from_str(
        &cli(&["admin", "consumerStatus", "-n", &cluster.namesrv_addr, "-g", GROUP, "--json"]).await?,
    )?;
    ensure!(json["clients"][0]["clientId"] == consumer.client_id() && json["noQueueHeldTwice"] == true, "{json}");

    // INVOKE_BROKER_TO_GET_CONSUMER_STATUS (`mqadmin getConsumerStatus`): the broker asks each
    // client of the group for the offsets it holds, here both queues at their ends.
    let status = admin.consumer_status(&addr, TOPIC, GROUP, None).await?;
    let held = status.get(consumer.client_id()).with_context(|| format!("{status:?}"))?;
    ensure!(status.len() == 1 && held.len() == 2, "{status:?}");
    for (mq, offset) in held {
        ensure!(mq.topic == TOPIC && *offset == admin.max_offset(&addr, TOPIC, mq.queue_id).await?, "{status:?}");
    }
    let only = admin.consumer_status(&addr, TOPIC, GROUP, Some(consumer.client_id())).await?;
    ensure!(only == status, "{only:?}");
    let stranger = admin.consumer_status(&addr, TOPIC, GROUP, Some("127.0.0.1@nobody")).await?;
    ensure!(stranger.is_empty(), "no client of that id: {stranger:?}");
    let offline = admin.consumer_status(&addr, TOPIC, "t56-nobody", None).await.err();
    ensure!(offline.as_ref().and_then(|e| e.response_code()) == Some(ResponseCode::SystemError), "{offline:?}");
    ensure!(format!("{offline:?}").contains("No Any Consumer online"), "{offline:?}");
    let printed = cli(&["admin", "getConsumerStatus", "-n", &cluster.namesrv_addr, "-g", GROUP, "-t", TOPIC]).await?;
    ensure!(
        printed.contains("get consumer status from client")
            && printed.contains("#clientId")
            && printed.contains(consumer.client_id()),
        "{printed}"
    );
    let json: serde_json::Value = serde_json::from_str(
        &cli(&["admin", "getConsumerStatus", "-n", &cluster.namesrv_addr, "-g", GROUP, "-t", TOPIC, "--json"]).await?,
    )?;
    ensure!(json["clients"][consumer.client_id()].as_array().map(Vec::len) == Some(2), "{json}");

    // CONSUME_MESSAGE_DIRECTLY: the broker sends the stored message to the client, whose listener
    // takes it once more (answering only after the call), and no offset moves.
    let before = seen.all().len();
    let direct = admin.consume_message_directly(&addr, GROUP, consumer.client_id(), &last_offset_msg_id).await?;
    ensure!(direct.consume_result == Some(CmResult::CrSuccess) && !direct.order && direct.auto_commit, "{direct:?}");
    let bodies = seen.bodies();
    ensure!(bodies.len() == before + 1 && bodies.last().map(String::as_str) == Some("after-3"), "{bodies:?}");
    let bad = admin.consume_message_directly(&addr, GROUP, consumer.client_id(), "NOT-A-MSG-ID").await.err();
    ensure!(bad.as_ref().and_then(|e| e.response_code()) == Some(ResponseCode::SystemError), "{bad:?}");
    let pushed = cli(&[
        "admin",
        "queryMsgById",
        "-n",
        &cluster.namesrv_addr,
        "-i",
        &last_offset_msg_id,
        "-g",
        GROUP,
        "-d",
        consumer.client_id(),
    ])
    .await?;
    ensure!(pushed.contains("consumeResult=CR_SUCCESS"), "{pushed}");
    ensure!(seen.all().len() == before + 2, "the CLI's push reached the listener too");

    consumer.shutdown().await;
    producer.shutdown().await;
    admin.shutdown().await;
    cluster.shutdown().await
}

/// CLONE_GROUP_OFFSET (`mqadmin cloneGroupOffset`): the destination group gets the source group's
/// committed offsets, replicated; a topic the broker lacks changes nothing; the CLI does the same
/// through the topic's route. GET_BROKER_CONSUME_STATS (`brokerConsumeStats`) then lists the
/// groups' progress.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offsets_are_cloned_to_another_group() -> Result<()> {
    const TOPIC: &str = "T56Clone";
    let cluster = Cluster::start(1).await?;
    cluster.create_topic(TOPIC, 2).await?;
    let addr = cluster.addr(cluster.wait_leader(WAIT).await?);
    let admin = Admin::new(&cluster.namesrv_addr)?;
    admin.update_consumer_offset(&addr, "t56-src", TOPIC, 0, 5).await?;
    admin.update_consumer_offset(&addr, "t56-src", TOPIC, 1, 7).await?;
    let offsets = |group: &'static str| {
        let (admin, addr) = (&admin, &addr);
        async move {
            Ok::<_, anyhow::Error>((
                admin.query_consumer_offset(addr, group, TOPIC, 0).await?,
                admin.query_consumer_offset(addr, group, TOPIC, 1).await?,
            ))
        }
    };
    // A group with no offset is answered as RocketMQ does (0 for a queue that starts at 0).
    let before = offsets("t56-dest").await?;
    ensure!(before != (Some(5), Some(7)), "{before:?}");

    admin.clone_group_offset(&addr, "t56-src", "t56-dest", Some(TOPIC), false).await?;
    ensure!(offsets("t56-dest").await? == (Some(5), Some(7)));
    // Every topic of the source group when none is named; a topic the broker lacks is skipped.
    admin.clone_group_offset(&addr, "t56-src", "t56-all", None, false).await?;
    ensure!(offsets("t56-all").await? == (Some(5), Some(7)));
    admin.clone_group_offset(&addr, "t56-src", "t56-none", Some("T56NoSuchTopic"), false).await?;
    ensure!(offsets("t56-none").await? == before, "a topic the broker lacks copies nothing");
    let e = admin.clone_group_offset(&addr, "t56-src", "bad group!", Some(TOPIC), false).await.unwrap_err();
    ensure!(e.to_string().contains("bad group!"), "{e}");

    let ns = cluster.namesrv_addr.clone();
    let out = cli(&["admin", "cloneGroupOffset", "-n", &ns, "-s", "t56-src", "-d", "t56-cli", "-t", TOPIC]).await?;
    ensure!(
        out.trim() == format!("clone group offset success. srcGroup[t56-src], destGroup=[t56-cli], topic[{TOPIC}]"),
        "{out}"
    );
    ensure!(offsets("t56-cli").await? == (Some(5), Some(7)));

    // GET_BROKER_CONSUME_STATS lists subscription groups: t56-src, with offsets 5 and 7 on two empty
    // queues, is 12 ahead of them (a lag of -12).
    admin.create_subscription_group(&addr, &SubscriptionGroupConfig::new("t56-src")).await?;
    let all = admin.broker_consume_stats(&addr, false).await?;
    let src = all.consume_stats_list.iter().find_map(|m| m.get("t56-src")).context("t56-src listed")?;
    ensure!(src.len() == 1 && src[0].compute_total_diff() == -12, "{src:?}");
    ensure!(all.total_diff == -12, "only t56-src is a subscription group with offsets: {all:?}");
    // The CLI lists queues whose group consumed a stored message (none here) and the total.
    let out = cli(&["admin", "brokerConsumeStats", "-n", &ns, "-b", &addr, "--json"]).await?;
    let v: serde_json::Value = serde_json::from_str(&out)?;
    ensure!(v["brokerAddr"] == addr.as_str() && v["queues"].as_array().is_some_and(Vec::is_empty), "{v}");
    ensure!(v["diffTotal"] == -12, "{v}");
    let out = cli(&["admin", "brokerConsumeStats", "-n", &ns, "-b", &addr]).await?;
    ensure!(out.starts_with("#Topic") && out.contains("Diff Total: -12"), "{out}");
    admin.shutdown().await;
    cluster.shutdown().await
}

/// Runs the `raftmq` binary; its stdout when it succeeded.
async fn cli(args: &[&str]) -> Result<String> {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_raftmq")).args(args).output().await?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    ensure!(out.status.success(), "raftmq {args:?} failed: {stdout}{}", String::from_utf8_lossy(&out.stderr));
    Ok(stdout)
}

/// mqadmin's lookups that need no new broker request: `queryMsgByUniqueKey` (QUERY_MESSAGE by
/// UNIQ_KEY), `queryMsgByOffset` (QUERY_CONSUME_QUEUE, then the record), `printMsg` and
/// `printMsgByQueue` and `consumeMessage` (PULL_MESSAGE as TOOLS_CONSUMER), `sendMessage`,
/// `sendMsgStatus`, `checkMsgSendRT`, `clusterRT`,
/// `topicClusterList`,
/// `allocateMQ` (averagely, as Java's) and `updateOrderConf` (the NameServers' ORDER_TOPIC_CONFIG,
/// which routes carry when the NameServer has `orderMessageEnable`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mqadmin_lookups_by_unique_key_offset_cluster_allocation_and_order_conf() -> Result<()> {
    const TOPIC: &str = "T56Lookup";
    let cluster = Cluster::start(1).await?;
    cluster.create_topic(TOPIC, 2).await?;
    let ns = cluster.namesrv_addr.clone();
    let producer = Producer::builder("t56-lookup-producers").namesrv_addr(&ns).build()?;
    producer.start().await?;
    let mut sent = Vec::new();
    for i in 0..4 {
        let mut msg = Message::new(TOPIC, format!("lookup-{i}").into_bytes());
        msg.set_tags(if i == 3 { "TagZ" } else { "TagL" });
        sent.push(producer.send(msg).await?);
    }
    producer.shutdown().await;

    let third = &sent[2];
    let shown = cli(&["admin", "queryMsgByUniqueKey", "-n", &ns, "-i", &third.msg_id, "-t", TOPIC]).await?;
    ensure!(shown.contains(&third.offset_msg_id) && shown.contains(&third.msg_id), "{shown}");
    let (queue, offset) = (third.message_queue.queue_id.to_string(), third.queue_offset.to_string());
    let args = ["admin", "queryMsgByOffset", "-n", &ns, "-t", TOPIC, "-b", BROKER_NAME, "-i", &queue, "-o", &offset];
    let at: serde_json::Value = serde_json::from_str(&cli(&[&args[..], &["--json"]].concat()).await?)?;
    ensure!(at["msgId"] == third.msg_id.as_str() && at["body"] == "lookup-2", "{at}");
    let past = ["admin", "queryMsgByOffset", "-n", &ns, "-t", TOPIC, "-b", BROKER_NAME, "-i", &queue, "-o", "99"];
    ensure!(cli(&past).await.is_err_and(|e| e.to_string().contains("no message at offset 99")), "past the end");

    // printMsg: every queue's span, then each message with its body; printMsgByQueue counts tags.
    let printed = cli(&["admin", "printMsg", "-n", &ns, "-t", TOPIC]).await?;
    ensure!(printed.matches("minOffset=").count() == 2, "{printed}");
    for (i, r) in sent.iter().enumerate() {
        ensure!(
            printed.contains(&format!("MSGID: {} ", r.msg_id)) && printed.contains(&format!("BODY: lookup-{i}")),
            "{printed}"
        );
    }
    let quiet = cli(&["admin", "printMsg", "-n", &ns, "-t", TOPIC, "-d", "false"]).await?;
    ensure!(quiet.matches("BODY: NOT PRINT BODY").count() == 4, "{quiet}");
    let all: serde_json::Value =
        serde_json::from_str(&cli(&["admin", "printMsg", "-n", &ns, "-t", TOPIC, "--json"]).await?)?;
    ensure!(all["messages"].as_array().map(Vec::len) == Some(4), "{all}");
    let counted =
        cli(&["admin", "printMsgByQueue", "-n", &ns, "-t", TOPIC, "-a", BROKER_NAME, "-i", &queue, "-f", "true"])
            .await?;
    let mut tags: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, r) in sent.iter().enumerate() {
        if r.message_queue.queue_id == third.message_queue.queue_id {
            *tags.entry(if i == 3 { "TagZ" } else { "TagL" }).or_default() += 1;
        }
    }
    let mut expected: Vec<(&str, usize)> = tags.into_iter().collect();
    expected.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(y.0)));
    let lines: Vec<String> = expected.iter().map(|(t, n)| format!("Tag: {t:<30} Count: {n}")).collect();
    ensure!(counted.lines().collect::<Vec<_>>() == lines, "{counted}");
    // printMsg reads on past windows with no match: only TagZ, the last message.
    let z = cli(&["admin", "printMsg", "-n", &ns, "-t", TOPIC, "-s", "TagZ"]).await?;
    ensure!(z.matches("MSGID: ").count() == 1 && z.contains("BODY: lookup-3"), "{z}");
    ensure!(cli(&["admin", "printMsg", "-n", &ns, "-t", TOPIC, "-c", "GBK"]).await.is_err(), "UTF-8 only");

    // consumeMessage: every queue; at most -c messages; one queue from an offset; past its end.
    let consumed = cli(&["admin", "consumeMessage", "-n", &ns, "-t", TOPIC]).await?;
    ensure!(consumed.matches("MSGID: ").count() == 4 && consumed.contains("Consume ok"), "{consumed}");
    let limited = cli(&["admin", "consumeMessage", "-n", &ns, "-t", TOPIC, "-c", "1"]).await?;
    ensure!(limited.matches("MSGID: ").count() == 1 && limited.contains("The older 1 message"), "{limited}");
    let args = ["admin", "consumeMessage", "-n", &ns, "-t", TOPIC, "-b", BROKER_NAME, "-i", &queue, "-o", &offset];
    let from = cli(&args).await?;
    let later = sent
        .iter()
        .filter(|r| r.message_queue.queue_id == third.message_queue.queue_id && r.queue_offset >= third.queue_offset)
        .count();
    ensure!(from.matches("MSGID: ").count() == later && from.contains(&format!("MSGID: {} ", third.msg_id)), "{from}");
    let past = ["admin", "consumeMessage", "-n", &ns, "-t", TOPIC, "-b", BROKER_NAME, "-i", &queue, "-o", "99"];
    ensure!(cli(&past).await?.contains("no matched msg, offset=99"), "past the end");
    ensure!(cli(&["admin", "consumeMessage", "-n", &ns, "-t", TOPIC, "-i", "0"]).await.is_err(), "-i needs -b");

    // sendMessage: to a chosen queue, with tags and keys.
    let args = ["admin", "sendMessage", "-n", &ns, "-t", TOPIC, "-p", "by-admin", "-c", "TagS", "-k", "k1 k2"];
    let one = cli(&[&args[..], &["-b", BROKER_NAME, "-i", "1"]].concat()).await?;
    let row = one.lines().nth(1).unwrap_or_default();
    ensure!(one.starts_with("#Broker Name") && row.starts_with(BROKER_NAME) && row.contains("SEND_OK"), "{one}");
    let r: serde_json::Value =
        serde_json::from_str(&cli(&[&args[..], &["-b", BROKER_NAME, "-i", "1", "--json"]].concat()).await?)?;
    ensure!(r["queueId"] == 1 && r["sendStatus"] == "SEND_OK", "{r}");
    let stored =
        cli(&["admin", "queryMsgByUniqueKey", "-n", &ns, "-i", r["msgId"].as_str().unwrap_or_default(), "-t", TOPIC])
            .await?;
    ensure!(stored.contains("TagS") && stored.contains("k1 k2") && stored.contains("by-admin"), "{stored}");
    ensure!(cli(&[&args[..], &["-i", "1"]].concat()).await.is_err(), "-i needs -b");

    // sendMsgStatus (the group's own topic) and checkMsgSendRT (every queue in turn).
    let status = cli(&["admin", "sendMsgStatus", "-n", &ns, "-b", BROKER_NAME, "-c", "3"]).await?;
    ensure!(
        status.lines().filter(|l| l.starts_with("rt:") && l.contains("sendStatus=SEND_OK")).count() == 3,
        "{status}"
    );
    let rt = cli(&["admin", "checkMsgSendRT", "-n", &ns, "-t", TOPIC, "-a", "4", "-s", "64"]).await?;
    ensure!(rt.matches(" true ").count() == 4 && rt.contains("Avg RT: "), "{rt}");

    let cluster_name = cluster.configs.values().next().context("a replica")?.broker_cluster_name.clone();
    let rts: serde_json::Value = serde_json::from_str(
        &cli(&["admin", "clusterRT", "-n", &ns, "-c", &cluster_name, "-a", "3", "--json"]).await?,
    )?;
    ensure!(rts[0]["brokerName"] == BROKER_NAME && rts[0]["successCount"] == 3 && rts[0]["failCount"] == 0, "{rts}");
    let logged = cli(&["admin", "clusterRT", "-n", &ns, "-a", "2", "-p", "true", "-m", "room1"]).await?;
    ensure!(logged.trim().contains(&format!("|room1|{cluster_name}|{BROKER_NAME}|")), "{logged}");

    let clusters = cli(&["admin", "topicClusterList", "-n", &ns, "-t", TOPIC]).await?;
    ensure!(clusters.trim() == cluster.configs.values().next().context("a replica")?.broker_cluster_name, "{clusters}");

    let shares: serde_json::Value = serde_json::from_str(
        &cli(&["admin", "allocateMQ", "-n", &ns, "-t", TOPIC, "-i", "10.0.0.1@a,10.0.0.2@b"]).await?,
    )?;
    ensure!(
        shares["result"]["10.0.0.1@a"][0]["queueId"] == 0 && shares["result"]["10.0.0.2@b"][0]["queueId"] == 1,
        "{shares}"
    );
    ensure!(shares["result"]["10.0.0.1@a"].as_array().map(Vec::len) == Some(1), "{shares}");

    let order = |method: &'static str, conf: Option<&'static str>| {
        let ns = ns.clone();
        async move {
            let mut args = vec!["admin", "updateOrderConf", "-n", &ns, "-t", TOPIC, "-m", method];
            args.extend(conf.map(|c| ["-v", c]).into_iter().flatten());
            cli(&args).await
        }
    };
    let put = order("put", Some("broker-a:2")).await?;
    ensure!(put.contains(&format!("update orderConf success. topic=[{TOPIC}], orderConf=[broker-a:2]")), "{put}");
    ensure!(order("get", None).await?.contains("orderConf=[broker-a:2]"));
    // A NameServer puts it in routes only with `orderMessageEnable`, as Java's does.
    let admin = Admin::new(&ns)?;
    ensure!(admin.topic_route(TOPIC).await?.order_topic_conf.is_none(), "orderMessageEnable is off");
    ensure!(order("put", None).await.is_err(), "put needs -v");
    ensure!(order("delete", None).await?.contains("delete orderConf success"));
    ensure!(order("get", None).await?.contains("orderConf=[null]"));
    admin.shutdown().await;
    cluster.shutdown().await
}
