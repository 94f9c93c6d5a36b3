//! Draining a broker group while it runs, as RocketMQ operators do: UPDATE_BROKER_CONFIG
//! (`mqadmin updateBrokerConfig -k brokerPermission -v 4`) and the NameServer's
//! WIPE/ADD_WRITE_PERM_OF_BROKER (`mqadmin wipeWritePerm` / `addWritePerm`). A NameServer and a
//! one-node group in process (harness `t40_cluster`), the SDK's admin, and raw SEND_MESSAGE_V2.
//!
//! - t57: a read-only replica refuses sends with NO_PERMISSION and registers its topics read-only
//!   at once (the registration period is an hour here); GET_BROKER_CONFIG shows the new value under
//!   a new version; keys sized at boot and bad values are refused with a remark naming the key,
//!   changing nothing; updates (`brokerPermission`, `maxMessageSize`) survive a restart, and another
//!   update undoes them; a lowered `timerMaxDelaySec` refuses longer timers; the NameServer's
//!   write-permission switches change the group's route without touching the broker.

use crate::harness;

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Result;
use anyhow::ensure;
use harness::cluster::Cluster;
use harness::cluster::WAIT;
use harness::cluster::until;
use raftmq_client::Admin;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::topic::perm;
use raftmq_common::protocol::header::send::SendMessageRequestHeaderV2;
use raftmq_common::remoting::RemotingClient;

const TOPIC: &str = "T57Drain";
const CALL_TIMEOUT: Duration = Duration::from_secs(5);

fn send_request(i: usize) -> RemotingCommand {
    let header = SendMessageRequestHeaderV2 {
        a: "t57-producers".into(),
        b: TOPIC.into(),
        c: "TBW102".into(),
        d: 4,
        e: 0,
        f: 0,
        g: 1_700_000_000_000,
        h: 0,
        i: Some(format!("UNIQ_KEY\u{1}T57{i:08}\u{2}")),
        j: Some(0),
        k: Some(false),
        l: None,
        m: Some(false),
        n: None,
    };
    RemotingCommand::request_with_header(RequestCode::SendMessageV2, &header).with_body(format!("m{i}").into_bytes())
}

fn kv(key: &str, value: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(key.to_owned(), value.to_owned())])
}

/// The perm of the group's queues in the NameServer's route of [`TOPIC`].
async fn route_perm(admin: &Admin) -> Result<i32> {
    let route = admin.topic_route(TOPIC).await?;
    Ok(route.queue_datas.first().map_or(-1, |q| q.perm))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_drained_at_runtime_refuses_writes_and_stays_drained_across_a_restart() -> Result<()> {
    // A registration period longer than any wait below: "at once" is the re-registration an
    // update of brokerPermission triggers, not the periodic one.
    let mut cluster = Cluster::start_with(1, |c| c.register_name_server_period = Duration::from_secs(3600)).await?;
    cluster.create_topic(TOPIC, 2).await?;
    let id = cluster.wait_leader(WAIT).await?;
    let addr = cluster.addr(id);
    let admin = Admin::new(&cluster.namesrv_addr)?;
    let raw = RemotingClient::new();
    let sent = raw.invoke(&addr, send_request(0), CALL_TIMEOUT).await?;
    ensure!(sent.response_code() == ResponseCode::Success, "{sent:?}");
    ensure!(route_perm(&admin).await? == perm::READ_WRITE);

    // Read-only: sends refused, the route read-only at once (no 30 s registration period).
    admin.update_broker_config(&addr, &kv("brokerPermission", "4")).await?;
    let refused = raw.invoke(&addr, send_request(1), CALL_TIMEOUT).await?;
    ensure!(refused.response_code() == ResponseCode::NoPermission, "{refused:?}");
    ensure!(refused.remark.as_deref().is_some_and(|r| r.contains("forbidden")), "{refused:?}");
    until("the read-only route", || route_perm(&admin), |p| *p == perm::READ).await?;
    let config = admin.broker_config(&addr).await?;
    ensure!(config.get("brokerPermission").map(String::as_str) == Some("4"), "{config:?}");
    let version = raw.invoke(&addr, RemotingCommand::request(RequestCode::GetBrokerConfig), CALL_TIMEOUT).await?;
    let version: serde_json::Value =
        serde_json::from_str(&version.ext_fields.get("version").map(|v| v.to_string()).unwrap_or_default())?;
    ensure!(version["counter"] == 1, "one update since boot: {version}");

    // A key sized at boot, an unknown key, a bad value: refused by name, nothing changes.
    let e = admin.update_broker_config(&addr, &kv("listenPort", "1")).await.unwrap_err();
    ensure!(e.response_code() == Some(ResponseCode::NoPermission), "{e}");
    ensure!(e.to_string().contains("listenPort cannot be changed while the broker runs"), "{e}");
    let mut mixed = kv("maxMessageSize", "1024");
    mixed.insert("brokerPermission".into(), "99".into());
    let e = admin.update_broker_config(&addr, &mixed).await.unwrap_err();
    ensure!(e.response_code() == Some(ResponseCode::SystemError), "{e}");
    ensure!(e.to_string().contains("brokerPermission 99"), "{e}");
    let config = admin.broker_config(&addr).await?;
    ensure!(config.get("maxMessageSize").map(String::as_str) == Some("4194304"), "all or nothing: {config:?}");
    // An empty update changes nothing and succeeds, as in Java.
    let empty = raw.invoke(&addr, RemotingCommand::request(RequestCode::UpdateBrokerConfig), CALL_TIMEOUT).await?;
    ensure!(empty.response_code() == ResponseCode::Success, "{empty:?}");
    ensure!(admin.broker_config(&addr).await?.get("brokerPermission").map(String::as_str) == Some("4"));

    // Another runtime key, checked once the replica is writable again (after the restart).
    admin.update_broker_config(&addr, &kv("maxMessageSize", "1024")).await?;

    // The update is durable: the restarted replica is still read-only.
    cluster.stop(id).await?;
    cluster.start_replica(id).await?;
    cluster.wait_leader(WAIT).await?;
    let refused = raw.invoke(&addr, send_request(2), CALL_TIMEOUT).await?;
    ensure!(refused.response_code() == ResponseCode::NoPermission, "after the restart: {refused:?}");
    let config = admin.broker_config(&addr).await?;
    ensure!(config.get("maxMessageSize").map(String::as_str) == Some("1024"), "{config:?}");

    // Writable again: sends succeed, the route is read-write again at once.
    admin.update_broker_config(&addr, &kv("brokerPermission", "6")).await?;
    let sent = raw.invoke(&addr, send_request(3), CALL_TIMEOUT).await?;
    ensure!(sent.response_code() == ResponseCode::Success, "{sent:?}");
    let mut big = send_request(9);
    big.body = vec![b'x'; 2048].into();
    let refused = raw.invoke(&addr, big, CALL_TIMEOUT).await?;
    ensure!(refused.response_code() == ResponseCode::MessageIllegal, "maxMessageSize 1024 kept: {refused:?}");
    until("the read-write route", || route_perm(&admin), |p| *p == perm::READ_WRITE).await?;

    // timerMaxDelaySec bounds the timer messages sent after it changed.
    admin.update_broker_config(&addr, &kv("timerMaxDelaySec", "10")).await?;
    let timer = |i: usize, secs: u32| {
        let mut r = send_request(i);
        r.ext_fields.insert("i".into(), format!("UNIQ_KEY\u{1}T57{i:08}\u{2}TIMER_DELAY_SEC\u{1}{secs}\u{2}").into());
        r
    };
    let refused = raw.invoke(&addr, timer(10, 11), CALL_TIMEOUT).await?;
    ensure!(refused.response_code() == ResponseCode::MessageIllegal, "{refused:?}");
    ensure!(refused.remark.as_deref().is_some_and(|r| r.contains("max delay 10000ms")), "{refused:?}");
    let sent = raw.invoke(&addr, timer(11, 10), CALL_TIMEOUT).await?;
    ensure!(sent.response_code() == ResponseCode::Success, "{sent:?}");

    // The NameServer's own switches: the broker is untouched (it still takes a direct send).
    let namesrv = cluster.namesrv_addr.clone();
    ensure!(admin.wipe_write_perm(&namesrv, harness::cluster::BROKER_NAME).await? >= 1);
    ensure!(route_perm(&admin).await? == perm::READ);
    let sent = raw.invoke(&addr, send_request(4), CALL_TIMEOUT).await?;
    ensure!(sent.response_code() == ResponseCode::Success, "{sent:?}");
    ensure!(admin.add_write_perm(&namesrv, harness::cluster::BROKER_NAME).await? >= 1);
    ensure!(route_perm(&admin).await? == perm::READ_WRITE);
    ensure!(admin.wipe_write_perm(&namesrv, "no-such-group").await? == 0);

    raw.close().await;
    admin.shutdown().await;
    cluster.shutdown().await
}
