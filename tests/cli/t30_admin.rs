//! `raftmq admin` against an in-process NameServer and a fake broker group (node 0 leads, node 1
//! follows): tables and `--json`, writes reaching the leader, config updates reaching every replica,
//! the NameServer's write-permission switches and KV config, topic perm changes, group deletion, the
//! fallbacks Java's tools also have, and the clear error when the broker lacks a request.

use crate::harness;

use anyhow::Result;
use harness::cli::CLUSTER;
use harness::cli::Cluster;
use harness::cli::QUEUES;
use harness::cli::TOPIC;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::header::admin::CreateTopicRequestHeader;

/// The whitespace-separated cells of each line of a table.
fn cells(table: &str) -> Vec<Vec<String>> {
    table.lines().map(|l| l.split_whitespace().map(str::to_owned).collect()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topic_list_and_route_as_tables_and_json() -> Result<()> {
    let cluster = Cluster::start().await?;
    let run = cluster.raftmq(&["admin", "topicList"]).await?.ok()?;
    assert!(run.stdout.lines().any(|l| l == TOPIC), "{}", run.stdout);
    let v = cluster.raftmq(&["admin", "topicList", "--json"]).await?.ok()?.json()?;
    assert!(v["topicList"].as_array().is_some_and(|l| l.iter().any(|t| t == TOPIC)), "{v}");

    // -n wins over NAMESRV_ADDR.
    let ns = cluster.namesrv_addr();
    let run = harness::cli::raftmq("127.0.0.1:1", &["admin", "topicRoute", "-n", &ns, "-t", TOPIC]).await?.ok()?;
    let rows = cells(&run.stdout);
    assert_eq!(rows[0], ["#Broker", "Name", "#Cluster", "#BID", "#Addr"], "{}", run.stdout);
    assert_eq!(rows[1], ["broker-a", CLUSTER, "0", cluster.leader.addr.as_str()]);
    assert_eq!(rows[2], ["broker-a", CLUSTER, "2", cluster.follower.addr.as_str()], "node 1 is brokerId 2");
    assert!(
        run.stdout.contains(&format!("broker-a      {QUEUES}             {QUEUES}              RW-")),
        "{}",
        run.stdout
    );

    let v = cluster.raftmq(&["admin", "topicRoute", "-t", TOPIC, "--json"]).await?.ok()?.json()?;
    assert_eq!(v["brokerDatas"][0]["brokerName"], "broker-a", "{v}");
    assert_eq!(v["brokerDatas"][0]["brokerAddrs"]["0"], cluster.leader.addr.as_str(), "{v}");
    assert_eq!(v["queueDatas"][0]["writeQueueNums"], QUEUES, "{v}");

    let run = cluster.raftmq(&["admin", "topicRoute", "-t", "NoSuchTopic"]).await?;
    assert!(!run.success && run.stderr.contains("TOPIC_NOT_EXIST"), "{}", run.stderr);
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_list_and_group_status_show_raft_roles() -> Result<()> {
    let cluster = Cluster::start().await?;
    let run = cluster.raftmq(&["admin", "clusterList"]).await?.ok()?;
    let rows = cells(&run.stdout);
    let header = ["#Cluster", "Name", "#Broker", "Name", "#BID", "#Addr", "#Role", "#Version", "#InTPS", "#OutTPS"];
    assert_eq!(rows[0][..10], header, "{}", run.stdout);
    assert_eq!(rows[0][10..], ["#InTotalToday", "#OutTotalToday"], "{}", run.stdout);
    // The fake nodes do not serve GET_BROKER_RUNTIME_INFO: their rows stay, with `-` for its values.
    let unknown = ["-"; 5];
    assert_eq!(rows[1][..5], [CLUSTER, "broker-a", "0", cluster.leader.addr.as_str(), "LEADER"]);
    assert_eq!(rows[1][5..], unknown);
    assert_eq!(rows[2][..5], [CLUSTER, "broker-a", "2", cluster.follower.addr.as_str(), "FOLLOWER"]);
    assert_eq!(rows[2][5..], unknown);

    let v = cluster.raftmq(&["admin", "clusterList", "--json"]).await?.ok()?.json()?;
    assert_eq!(v["clusterAddrTable"][CLUSTER][0], "broker-a", "{v}");
    assert_eq!(v["brokerAddrTable"]["broker-a"]["brokerAddrs"]["2"], cluster.follower.addr.as_str(), "{v}");

    let run = cluster.raftmq(&["admin", "groupStatus", "-b", "broker-a"]).await?.ok()?;
    assert!(run.stdout.contains(&format!("Leader: {}", cluster.leader.addr)), "{}", run.stdout);
    let v = cluster.raftmq(&["admin", "groupStatus", "-b", "broker-a", "--json"]).await?.ok()?.json()?;
    assert_eq!(v["members"][1]["raftNodeId"], 1, "{v}");
    assert_eq!(v["members"][1]["role"], "FOLLOWER", "{v}");

    // Fake brokers lack the group-administration requests: a clear error, not a usage error.
    let run = cluster.raftmq(&["admin", "transferLeader", "-b", "broker-a", "--to", "1"]).await?;
    assert!(!run.success);
    assert!(
        run.stderr.contains("transferLeader: the broker does not support RAFT_TRANSFER_LEADERSHIP yet"),
        "{}",
        run.stderr
    );
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_topic_writes_to_the_leader_of_each_target() -> Result<()> {
    let cluster = Cluster::start().await?;
    let run =
        cluster.raftmq(&["admin", "updateTopic", "-c", CLUSTER, "-t", "NewTopic", "-r", "2", "-w", "3"]).await?.ok()?;
    assert!(run.stdout.contains(&format!("create topic to {} success.", cluster.leader.addr)), "{}", run.stdout);
    assert!(
        run.stdout.contains("TopicConfig [topicName=NewTopic, readQueueNums=2, writeQueueNums=3, perm=RW-"),
        "{}",
        run.stdout
    );
    let v =
        cluster.raftmq(&["admin", "updateTopic", "-b", "broker-a", "-t", "NewTopic", "--json"]).await?.ok()?.json()?;
    assert_eq!(v["written"][0]["addr"], cluster.leader.addr.as_str(), "{v}");

    let creates = cluster.leader.requests_of(RequestCode::UpdateAndCreateTopic);
    assert_eq!(creates.len(), 2);
    let h: CreateTopicRequestHeader = creates[0].decode_header()?;
    assert_eq!((h.topic.as_str(), h.read_queue_nums, h.write_queue_nums, h.perm), ("NewTopic", 2, 3, 6));
    assert!(cluster.follower.requests_of(RequestCode::UpdateAndCreateTopic).is_empty());

    let run = cluster.raftmq(&["admin", "updateTopic", "-t", "NewTopic"]).await?;
    assert!(!run.success, "-c or -b is required");
    cluster.shutdown().await;
    Ok(())
}

/// `updateBrokerConfig -c` reaches every replica of the cluster (Java's masters and slaves);
/// `wipeWritePerm` / `addWritePerm` change the group's route in every NameServer, with Java's lines;
/// `getNamesrvConfig` / `updateNamesrvConfig` read and change every NameServer's runtime keys.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_config_updates_and_write_perm_switches() -> Result<()> {
    let cluster = Cluster::start().await?;
    let run = cluster
        .raftmq(&["admin", "updateBrokerConfig", "-c", CLUSTER, "-k", "brokerPermission", "-v", "4"])
        .await?
        .ok()?;
    for broker in [&cluster.leader, &cluster.follower] {
        assert!(run.stdout.contains(&format!("update broker config success, {}", broker.addr)), "{}", run.stdout);
        let updates = broker.requests_of(RequestCode::UpdateBrokerConfig);
        assert_eq!(updates.len(), 1, "{}", broker.addr);
        assert_eq!(std::str::from_utf8(&updates[0].body)?, "brokerPermission=4\n");
    }

    let ns = cluster.namesrv_addr();
    let run = cluster.raftmq(&["admin", "wipeWritePerm", "-b", "broker-a"]).await?.ok()?;
    assert_eq!(run.stdout.trim(), format!("wipe write perm of broker[broker-a] in name server[{ns}] OK, 1"));
    let route = cluster.raftmq(&["admin", "topicRoute", "-t", TOPIC, "--json"]).await?.ok()?.json()?;
    assert_eq!(route["queueDatas"][0]["perm"], 4, "{route}");
    let run = cluster.raftmq(&["admin", "addWritePerm", "-b", "broker-a"]).await?.ok()?;
    assert_eq!(run.stdout.trim(), format!("add write perm of broker[broker-a] in name server[{ns}] OK, 1"));
    let route = cluster.raftmq(&["admin", "topicRoute", "-t", TOPIC, "--json"]).await?.ok()?.json()?;
    assert_eq!(route["queueDatas"][0]["perm"], 6, "{route}");

    // `getNamesrvConfig` / `updateNamesrvConfig`: a runtime key changes at once in every NameServer;
    // one that needs a restart is refused by name and changes nothing.
    let config = cluster.raftmq(&["admin", "getNamesrvConfig", "--json"]).await?.ok()?.json()?;
    assert_eq!(config[ns.as_str()]["enableTopicList"], "true", "{config}");
    let run = cluster.raftmq(&["admin", "updateNamesrvConfig", "-k", "enableTopicList", "-v", "false"]).await?.ok()?;
    assert_eq!(run.stdout.trim(), format!("update name server config success!{ns}"));
    let config = cluster.raftmq(&["admin", "getNamesrvConfig", "--json"]).await?.ok()?.json()?;
    assert_eq!(config[ns.as_str()]["enableTopicList"], "false", "{config}");
    let run = cluster.raftmq(&["admin", "updateNamesrvConfig", "-k", "listenPort", "-v", "1"]).await?;
    assert!(!run.success && run.stdout.contains("listenPort"), "{}\n{}", run.stdout, run.stderr);
    let after = cluster.raftmq(&["admin", "getNamesrvConfig", "--json"]).await?.ok()?.json()?;
    assert_eq!(after, config, "a refused update changes nothing");
    let text = cluster.raftmq(&["admin", "getNamesrvConfig"]).await?.ok()?;
    assert!(text.stdout.lines().any(|l| l.starts_with("enableTopicList") && l.ends_with(": false")), "{}", text.stdout);
    cluster.shutdown().await;
    Ok(())
}

/// `updateTopicPerm` changes only the perm of the broker's own topic config; `deleteSubGroup -c`
/// also deletes the group's retry and DLQ topics; `updateKvConfig` / `deleteKvConfig` reach the
/// NameServer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topic_perm_group_deletion_and_kv_config() -> Result<()> {
    let cluster = Cluster::start().await?;
    let leader = &cluster.leader.addr;
    let run = cluster.raftmq(&["admin", "updateTopicPerm", "-t", TOPIC, "-b", "broker-a", "-p", "4"]).await?.ok()?;
    assert_eq!(run.stdout.trim(), format!("update topic perm from 6 to 4 in {leader} success."));
    let updates = cluster.leader.requests_of(RequestCode::UpdateAndCreateTopic);
    assert_eq!(updates.len(), 1);
    let h: CreateTopicRequestHeader = updates[0].decode_header()?;
    assert_eq!((h.perm, h.read_queue_nums, h.order), (4, QUEUES, true), "only the perm changes: {h:?}");
    let run = cluster.raftmq(&["admin", "updateTopicPerm", "-t", TOPIC, "-b", "broker-a", "-p", "6"]).await?.ok()?;
    assert_eq!(run.stdout.trim(), "new perm equals to the old one!");
    assert_eq!(cluster.leader.requests_of(RequestCode::UpdateAndCreateTopic).len(), 1, "nothing written");
    let run = cluster.raftmq(&["admin", "updateTopicPerm", "-t", TOPIC, "-b", "broker-a", "-p", "5"]).await?;
    assert!(!run.success && run.stderr.contains("-p must be 2 (write), 4 (read) or 6"), "{}", run.stderr);

    let run = cluster.raftmq(&["admin", "deleteSubGroup", "-g", "g30", "-c", CLUSTER]).await?.ok()?;
    assert!(
        run.stdout.contains(&format!(
            "delete subscription group [g30] from broker [{leader}] in cluster [{CLUSTER}] success."
        )),
        "{}",
        run.stdout
    );
    let deletes = cluster.leader.requests_of(RequestCode::DeleteSubscriptiongroup);
    assert_eq!(deletes.len(), 1);
    assert_eq!(deletes[0].ext_fields.get("groupName").map(|v| v.as_str()), Some("g30"));
    assert_eq!(deletes[0].ext_fields.get("removeOffset").map(|v| v.as_str()), Some("false"));
    cluster.raftmq(&["admin", "deleteSubGroup", "-g", "g31", "-b", "broker-a", "-r", "true"]).await?.ok()?;
    let deletes = cluster.leader.requests_of(RequestCode::DeleteSubscriptiongroup);
    assert_eq!(deletes[1].ext_fields.get("removeOffset").map(|v| v.as_str()), Some("true"), "-r true asks for it");
    let topics: Vec<String> = cluster
        .leader
        .requests_of(RequestCode::DeleteTopicInBroker)
        .iter()
        .filter_map(|r| r.ext_fields.get("topic").map(|v| v.to_string()))
        .collect();
    assert_eq!(topics, ["%RETRY%g30", "%DLQ%g30"]);

    let run = cluster.raftmq(&["admin", "updateKvConfig", "-s", "T30_NS", "-k", "k1", "-v", "v1"]).await?.ok()?;
    assert_eq!(run.stdout.trim(), "create or update kv config to namespace success.");
    let admin = raftmq_client::Admin::new(&cluster.namesrv_addr())?;
    assert_eq!(admin.get_kv_config("T30_NS", "k1").await?.as_deref(), Some("v1"));
    let run = cluster.raftmq(&["admin", "deleteKvConfig", "-s", "T30_NS", "-k", "k1"]).await?.ok()?;
    assert_eq!(run.stdout.trim(), "delete kv config from namespace success.");
    assert_eq!(admin.get_kv_config("T30_NS", "k1").await?, None);
    admin.shutdown().await;
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_broker_requests_fall_back_or_say_so() -> Result<()> {
    let cluster = Cluster::start().await?;
    // GET_TOPIC_STATS_INFO is not supported: per-queue GET_MIN/MAX_OFFSET instead.
    let run = cluster.raftmq(&["admin", "topicStatus", "-t", TOPIC]).await?.ok()?;
    let rows = cells(&run.stdout);
    assert_eq!(rows.len(), 1 + QUEUES as usize, "{}", run.stdout);
    assert_eq!(rows[1], ["broker-a", "0", "5", "100"]);

    // QUERY_MESSAGE is not supported: a clear error and a non-zero exit.
    let run = cluster.raftmq(&["admin", "queryMsgByKey", "-t", TOPIC, "-k", "K1"]).await?;
    assert!(!run.success);
    assert!(run.stderr.contains("queryMsgByKey: the broker does not support QUERY_MESSAGE yet"), "{}", run.stderr);

    let offset_msg_id = raftmq_common::message::OffsetMsgId::new(cluster.leader.addr.parse()?, 0).to_string();
    let run = cluster.raftmq(&["admin", "queryMsgById", "-i", &offset_msg_id]).await?;
    assert!(!run.success);
    assert!(run.stderr.contains("queryMsgById: the broker does not support VIEW_MESSAGE_BY_ID yet"), "{}", run.stderr);
    cluster.shutdown().await;
    Ok(())
}
