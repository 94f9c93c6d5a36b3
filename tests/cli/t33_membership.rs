//! `raftmq admin groupStatus` and `raftmq admin transferLeader` against a real 3-replica group (harness
//! `t40_cluster`), run as the real binary (runner of `t30_cli_harness`): every member's own view as a
//! table and as JSON, and a leadership transfer that the group then shows; `raftmq admin
//! getBrokerConfig` of single replicas, as text and as JSON; `raftmq admin statsAll` of a topic
//! with one consumer group's backlog.

use crate::harness;

use std::collections::BTreeSet;

use anyhow::Context;
use anyhow::Result;
use anyhow::ensure;
use harness::cluster::BROKER_NAME;
use harness::cluster::Cluster;
use harness::cluster::WAIT;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_group_status_and_transfer_leader() -> Result<()> {
    let cluster = Cluster::start(3).await?;
    let leader = cluster.wait_leader(WAIT).await?;
    let ns = cluster.namesrv_addr.clone();

    let run = harness::cli::raftmq(&ns, &["admin", "groupStatus", "-n", &ns, "-b", BROKER_NAME]).await?.ok()?;
    let rows: Vec<Vec<&str>> = run.stdout.lines().map(|l| l.split_whitespace().collect()).collect();
    ensure!(rows[0][..4] == ["#Broker", "Name", "#Node", "#Addr"], "{}", run.stdout);
    for id in 1..=3u64 {
        let addr = cluster.addr(id);
        let row = rows.iter().find(|r| r.get(2) == Some(&addr.as_str())).with_context(|| run.stdout.clone())?;
        let role = if id == leader { "LEADER" } else { "FOLLOWER" };
        ensure!(row[1] == id.to_string() && row[3] == role && row[9] == "1,2,3", "{row:?}\n{}", run.stdout);
    }
    ensure!(run.stdout.contains(&format!("Leader: {} (node {leader}", cluster.addr(leader))), "{}", run.stdout);
    ensure!(run.stdout.contains("#Match Index"), "the leader's follower progress: {}", run.stdout);

    let v = harness::cli::raftmq(&ns, &["admin", "groupStatus", "-b", BROKER_NAME, "--json"]).await?.ok()?.json()?;
    ensure!(v["leader"]["id"] == leader, "{v}");
    let members = v["members"].as_array().context("members")?;
    ensure!(members.len() == 3, "{v}");
    let ids: BTreeSet<u64> = members.iter().filter_map(|m| m["status"]["nodeId"].as_u64()).collect();
    ensure!(ids == BTreeSet::from([1, 2, 3]), "{v}");

    let to = if leader == 3 { 2 } else { 3 };
    let to_arg = to.to_string();
    cluster.wait_followers_live(WAIT).await?;
    let run = harness::cli::raftmq(&ns, &["admin", "transferLeader", "-b", BROKER_NAME, "-i", &to_arg]).await?.ok()?;
    ensure!(run.stdout.contains(&format!("transferLeader {to} on group {BROKER_NAME} success")), "{}", run.stdout);
    ensure!(cluster.wait_leader(WAIT).await? == to, "node {to} leads after the transfer");

    // Without -i: the most up-to-date other voter; JSON for scripts.
    let v = harness::cli::raftmq(&ns, &["admin", "transferLeader", "-b", BROKER_NAME, "--json"]).await?.ok()?.json()?;
    let new = v["leader"].as_u64().context("leader")?;
    ensure!(new != to && v["operation"] == "transferLeader" && v["voters"] == serde_json::json!([1, 2, 3]), "{v}");

    // A node that is not a voter is refused with the reason.
    let run = harness::cli::raftmq(&ns, &["admin", "transferLeader", "-b", BROKER_NAME, "-i", "9"]).await?;
    ensure!(!run.success && run.stderr.contains("node 9 is not a voter"), "{}", run.stderr);

    // getBrokerConfig: any replica lists its own config under RocketMQ's key names.
    let one = cluster.addr(1);
    let run = harness::cli::raftmq(&ns, &["admin", "getBrokerConfig", "-b", &one]).await?.ok()?;
    let line =
        |key: &str| run.stdout.lines().find(|l| l.split(':').next().map(str::trim) == Some(key)).map(str::to_owned);
    ensure!(line("brokerName").is_some_and(|l| l.ends_with(&format!(": {BROKER_NAME}"))), "{}", run.stdout);
    ensure!(line("raftSelfId").is_some_and(|l| l.ends_with(": 1")), "{}", run.stdout);
    let two = cluster.addr(2);
    let v = harness::cli::raftmq(&ns, &["admin", "getBrokerConfig", "-b", &two, "--json"]).await?.ok()?.json()?;
    ensure!(v[two.as_str()]["raftSelfId"] == "2" && v[two.as_str()]["brokerName"] == BROKER_NAME, "{v}");

    // statsAll: each consumer group of a topic with its backlog, from QUERY_TOPIC_CONSUME_BY_WHO,
    // GET_CONSUME_STATS and VIEW_BROKER_STATS_DATA.
    let topic = "T60Stats";
    cluster.create_topic(topic, 4).await?;
    harness::cli::raftmq(&ns, &["send", "-t", topic, "--count", "5", "hello"]).await?.ok()?;
    let admin = raftmq_client::Admin::new(&ns)?;
    let leader_addr = cluster.addr(cluster.wait_leader(WAIT).await?);
    let consumed = admin.max_offset(&leader_addr, topic, 0).await?;
    admin.update_consumer_offset(&leader_addr, "t60-stats", topic, 0, consumed).await?;
    let v = harness::cli::raftmq(&ns, &["admin", "statsAll", "-t", topic, "--json"]).await?.ok()?.json()?;
    let rows = v.as_array().context("one row per group")?;
    ensure!(rows.len() == 1 && rows[0]["topic"] == topic && rows[0]["consumerGroup"] == "t60-stats", "{v}");
    ensure!(rows[0]["accumulation"] == 5 - consumed, "5 sent, {consumed} consumed: {v}");
    let run = harness::cli::raftmq(&ns, &["admin", "statsAll", "-t", topic]).await?.ok()?;
    ensure!(run.stdout.starts_with("#Topic") && run.stdout.contains("t60-stats"), "{}", run.stdout);
    cluster.create_topic("T60Lonely", 1).await?;
    let run = harness::cli::raftmq(&ns, &["admin", "statsAll", "-t", "T60Lonely"]).await?.ok()?;
    ensure!(run.stdout.lines().any(|l| l.starts_with("T60Lonely") && l.ends_with("NO_CONSUMER")), "{}", run.stdout);
    admin.shutdown().await;
    cluster.crash_all().await
}
