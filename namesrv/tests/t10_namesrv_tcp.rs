//! NameServer over TCP: two NameServers, one broker group of three simulated nodes registering with
//! both through `RemotingClient` (a test client speaking REGISTER_BROKER), leadership moving
//! through increasing terms, connection close, expiry, bad input, and routes decoded with route types
//! written independently of ours.
//!
//! Waiting: registrations are request/response, so after one heartbeat round both NameServers have
//! applied it and are checked at once. Only effects the server applies on its own (a closed
//! connection, the liveness scan) are awaited by polling with a deadline.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context;
use anyhow::Result;
use anyhow::bail;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::register::RegisterBrokerBody;
use raftmq_common::protocol::body::register::TopicConfigSerializeWrapper;
use raftmq_common::protocol::body::register::body_crc32;
use raftmq_common::protocol::body::topic::DataVersion;
use raftmq_common::protocol::body::topic::TopicConfig;
use raftmq_common::protocol::header::CommandHeader;
use raftmq_common::protocol::header::namesrv::GetRouteInfoRequestHeader;
use raftmq_common::protocol::header::namesrv::RaftRegistration;
use raftmq_common::protocol::header::namesrv::RaftRole;
use raftmq_common::protocol::header::namesrv::RegisterBrokerRequestHeader;
use raftmq_common::remoting::RemotingClient;
use raftmq_namesrv::config::NamesrvConfig;
use raftmq_namesrv::server::NameServer;

const RPC_TIMEOUT: Duration = Duration::from_secs(3);
const EVENTUALLY_MAX: Duration = Duration::from_secs(10);
const TOPIC: &str = "TopicTest";

/// Route types written from RocketMQ's JSON schema, independently of `raftmq_common`, and as strict
/// as the strictest client we know (mxsm/rocketmq-rust's `TopicRouteData`/`BrokerData`/`QueueData`):
/// no `serde(default)`, so every field those types require must be present; brokerIds are `u64`,
/// queue numbers and perm `u32`.
mod independent {
    use std::collections::HashMap;

    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    pub struct TopicRouteData {
        #[serde(rename = "orderTopicConf")]
        pub order_topic_conf: Option<String>,
        #[serde(rename = "queueDatas")]
        pub queue_datas: Vec<QueueData>,
        #[serde(rename = "brokerDatas")]
        pub broker_datas: Vec<BrokerData>,
        #[serde(rename = "filterServerTable")]
        pub filter_server_table: HashMap<String, Vec<String>>,
        #[serde(rename = "topicQueueMappingInfo")]
        pub topic_queue_mapping_info: Option<serde_json::Value>,
    }

    #[derive(Debug, Deserialize)]
    pub struct BrokerData {
        pub cluster: String,
        #[serde(rename = "brokerName")]
        pub broker_name: String,
        #[serde(rename = "brokerAddrs")]
        pub broker_addrs: HashMap<u64, String>,
        #[serde(rename = "zoneName")]
        pub zone_name: Option<String>,
        #[serde(rename = "enableActingMaster")]
        pub enable_acting_master: bool,
    }

    #[derive(Debug, Deserialize)]
    pub struct QueueData {
        #[serde(rename = "brokerName")]
        pub broker_name: String,
        #[serde(rename = "readQueueNums")]
        pub read_queue_nums: u32,
        #[serde(rename = "writeQueueNums")]
        pub write_queue_nums: u32,
        pub perm: u32,
        #[serde(rename = "topicSysFlag")]
        pub topic_sys_flag: u32,
    }
}

fn test_config() -> NamesrvConfig {
    NamesrvConfig {
        listen_port: 0,
        bind_address: "127.0.0.1".into(),
        scan_not_active_broker_interval: Duration::from_millis(100),
        broker_channel_expired_time: Duration::from_secs(60),
        kv_config_path: String::new(),
        ..NamesrvConfig::default()
    }
}

/// One simulated broker node: its own client, so its own connection to each NameServer.
struct Node {
    id: u64,
    client: RemotingClient,
}

impl Node {
    fn addr(&self) -> String {
        node_addr(self.id)
    }

    async fn heartbeat(&self, namesrv: &str, term: u64, role: RaftRole, timeout_ms: Option<i64>) -> Result<()> {
        let mut wrapper = TopicConfigSerializeWrapper {
            data_version: DataVersion { counter: 1, timestamp: 1_700_000_000_000 },
            ..Default::default()
        };
        let config = TopicConfig { read_queue_nums: 8, write_queue_nums: 8, ..TopicConfig::new(TOPIC) };
        wrapper.topic_config_table.insert(TOPIC.to_owned(), config);
        let body = RegisterBrokerBody { filter_server_list: vec![], topic_config_serialize_wrapper: wrapper }
            .encode_body(true)?;
        let header = RegisterBrokerRequestHeader {
            broker_name: "broker-a".into(),
            broker_addr: self.addr(),
            cluster_name: "DefaultCluster".into(),
            ha_server_addr: format!("127.0.0.1:{}", 40911 + self.id),
            broker_id: if role == RaftRole::Leader { 0 } else { self.id as i64 + 1 },
            heartbeat_timeout_millis: timeout_ms,
            compressed: true,
            body_crc32: body_crc32(&body),
            raft: Some(RaftRegistration { term, role, node_id: self.id }),
        };
        let request = RemotingCommand::request_with_header(RequestCode::RegisterBroker, &header).with_body(body);
        let response = self.client.invoke(namesrv, request, RPC_TIMEOUT).await?;
        if response.response_code() != ResponseCode::Success {
            bail!("REGISTER_BROKER failed: {} {:?}", response.response_code(), response.remark);
        }
        Ok(())
    }
}

fn node_addr(id: u64) -> String {
    format!("127.0.0.1:{}", 10911 + 10 * id)
}

/// Every node heartbeats to every NameServer once: the leader at `term` as LEADER, the rest as FOLLOWER.
async fn heartbeat_round(nodes: &[Node], namesrvs: &[String], term: u64, leader: u64) -> Result<()> {
    for ns in namesrvs {
        for node in nodes {
            let role = if node.id == leader { RaftRole::Leader } else { RaftRole::Follower };
            node.heartbeat(ns, term, role, None).await?;
        }
    }
    Ok(())
}

async fn route(client: &RemotingClient, namesrv: &str, topic: &str) -> Result<RemotingCommand> {
    let header = GetRouteInfoRequestHeader { topic: topic.into(), accept_standard_json_only: Some(true) };
    let request = RemotingCommand::request_with_header(RequestCode::GetRouteinfoByTopic, &header);
    Ok(client.invoke(namesrv, request, RPC_TIMEOUT).await?)
}

/// The topic's brokerAddrs for broker-a, decoded with the independent types.
async fn broker_addrs(client: &RemotingClient, namesrv: &str) -> Result<BTreeMap<u64, String>> {
    let response = route(client, namesrv, TOPIC).await?;
    if response.response_code() != ResponseCode::Success {
        bail!("GET_ROUTEINFO_BY_TOPIC failed: {} {:?}", response.response_code(), response.remark);
    }
    let route: independent::TopicRouteData =
        serde_json::from_slice(&response.body).context("route JSON must decode with the independent types")?;
    assert!(route.filter_server_table.is_empty() && route.order_topic_conf.is_none());
    assert!(route.topic_queue_mapping_info.is_none());
    let queue = route.queue_datas.first().context("queue data")?;
    assert_eq!((queue.broker_name.as_str(), queue.read_queue_nums, queue.write_queue_nums), ("broker-a", 8, 8));
    assert_eq!((queue.perm, queue.topic_sys_flag), (6, 0));
    let broker = route.broker_datas.first().context("broker data")?;
    assert_eq!((broker.cluster.as_str(), broker.broker_name.as_str()), ("DefaultCluster", "broker-a"));
    assert!(!broker.enable_acting_master && broker.zone_name.is_none());
    Ok(broker.broker_addrs.iter().map(|(k, v)| (*k, v.clone())).collect())
}

fn expected(pairs: &[(u64, u64)]) -> BTreeMap<u64, String> {
    pairs.iter().map(|(broker_id, node)| (*broker_id, node_addr(*node))).collect()
}

/// Polls `check` until it holds, for effects the server applies on its own.
async fn eventually(what: &str, mut check: impl AsyncFnMut() -> Result<bool>) -> Result<()> {
    let deadline = tokio::time::Instant::now() + EVENTUALLY_MAX;
    loop {
        if check().await? {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            bail!("{what} did not happen within {EVENTUALLY_MAX:?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_namesrvs_follow_a_group_whose_leadership_moves() -> Result<()> {
    let ns = [NameServer::start(test_config()).await?, NameServer::start(test_config()).await?];
    let addrs: Vec<String> = ns.iter().map(|n| n.local_addr().to_string()).collect();
    let nodes: Vec<Node> = (0..3).map(|id| Node { id, client: RemotingClient::new() }).collect();
    let reader = RemotingClient::new();

    // Term 1: node 0 leads. Followers are raftNodeId + 1.
    heartbeat_round(&nodes, &addrs, 1, 0).await?;
    for a in &addrs {
        assert_eq!(broker_addrs(&reader, a).await?, expected(&[(0, 0), (2, 1), (3, 2)]), "namesrv {a}");
    }

    // Term 2: node 1 leads. One round converges both NameServers, and the deposed leader's late
    // LEADER heartbeat from term 1 does not take the route back.
    heartbeat_round(&nodes, &addrs, 2, 1).await?;
    for a in &addrs {
        nodes[0].heartbeat(a, 1, RaftRole::Leader, None).await?;
    }
    for a in &addrs {
        assert_eq!(broker_addrs(&reader, a).await?, expected(&[(0, 1), (1, 0), (3, 2)]), "namesrv {a}");
    }

    // Term 3: node 2 leads; the NameServers hear the nodes in opposite orders.
    for node in nodes.iter().rev() {
        let role = if node.id == 2 { RaftRole::Leader } else { RaftRole::Follower };
        node.heartbeat(&addrs[0], 3, role, None).await?;
    }
    for node in &nodes {
        let role = if node.id == 2 { RaftRole::Leader } else { RaftRole::Follower };
        node.heartbeat(&addrs[1], 3, role, None).await?;
    }
    for a in &addrs {
        assert_eq!(broker_addrs(&reader, a).await?, expected(&[(0, 2), (1, 0), (2, 1)]), "namesrv {a}");
    }

    // The leader's connections close: both NameServers drop it at once. The group leaves the write
    // routes (no brokerId 0) but keeps read routes to its live followers.
    nodes[2].client.close().await;
    for a in &addrs {
        eventually("leader removal on connection close", async || {
            Ok(broker_addrs(&reader, a).await? == expected(&[(1, 0), (2, 1)]))
        })
        .await?;
    }

    // Node 0 announces a short heartbeat timeout and falls silent: the scanner expires it.
    for a in &addrs {
        nodes[0].heartbeat(a, 3, RaftRole::Follower, Some(300)).await?;
    }
    for a in &addrs {
        eventually("expiry of a silent broker", async || Ok(broker_addrs(&reader, a).await? == expected(&[(2, 1)])))
            .await?;
    }

    // Node 1 is elected in term 4 and reports to both NameServers: writes are routed again.
    for a in &addrs {
        nodes[1].heartbeat(a, 4, RaftRole::Leader, None).await?;
        assert_eq!(broker_addrs(&reader, a).await?, expected(&[(0, 1)]), "namesrv {a}");
    }

    for n in &ns {
        n.shutdown().await;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_an_error_with_a_remark_and_the_server_keeps_serving() -> Result<()> {
    let server = NameServer::start(test_config()).await?;
    let addr = server.local_addr().to_string();
    let node = Node { id: 0, client: RemotingClient::new() };
    node.heartbeat(&addr, 1, RaftRole::Leader, None).await?;
    let client = RemotingClient::new();

    let mut cases: Vec<(&str, RemotingCommand, ResponseCode, &str)> = Vec::new();
    cases.push((
        "unknown request code",
        RemotingCommand::request(RequestCode::Unknown(54_321)),
        ResponseCode::RequestCodeNotSupported,
        "54321",
    ));
    let mut missing = RegisterBrokerRequestHeader {
        broker_name: "broker-x".into(),
        broker_addr: "127.0.0.1:1".into(),
        cluster_name: "C".into(),
        ha_server_addr: String::new(),
        broker_id: 0,
        heartbeat_timeout_millis: None,
        compressed: false,
        body_crc32: 0,
        raft: None,
    }
    .to_ext_fields();
    missing.shift_remove("brokerAddr");
    let mut missing_cmd = RemotingCommand::request(RequestCode::RegisterBroker);
    missing_cmd.ext_fields = missing.clone();
    cases.push(("register with a missing field", missing_cmd, ResponseCode::SystemError, "brokerAddr"));
    missing.insert("brokerAddr".into(), "127.0.0.1:1".into());
    let mut malformed =
        RemotingCommand::request(RequestCode::RegisterBroker).with_body(&b"{\"filterServerList\":[1,"[..]);
    malformed.ext_fields = missing.clone();
    cases.push(("register with a malformed body", malformed, ResponseCode::SystemError, "body"));
    missing.insert("raftTerm".into(), "-3".into());
    let mut bad_term = RemotingCommand::request(RequestCode::RegisterBroker);
    bad_term.ext_fields = missing;
    cases.push(("register with a bad raftTerm", bad_term, ResponseCode::SystemError, "raftTerm"));
    let unknown_topic = {
        let header = GetRouteInfoRequestHeader { topic: "NoSuchTopic".into(), accept_standard_json_only: None };
        RemotingCommand::request_with_header(RequestCode::GetRouteinfoByTopic, &header)
    };
    cases.push(("unknown topic", unknown_topic, ResponseCode::TopicNotExist, "NoSuchTopic"));

    for (name, request, code, remark_part) in cases {
        let response = client.invoke(&addr, request, RPC_TIMEOUT).await.with_context(|| name.to_owned())?;
        assert_eq!(response.response_code(), code, "{name}: {:?}", response.remark);
        let remark = response.remark.unwrap_or_default();
        assert!(remark.contains(remark_part), "{name}: remark {remark:?} should mention {remark_part:?}");
        // The same connection still serves routes.
        assert_eq!(broker_addrs(&client, &addr).await?, expected(&[(0, 0)]), "after {name}");
    }
    assert_eq!(server.processor().routes().live_broker_count(), 1, "bad registrations registered nothing");
    server.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn shutdown_releases_the_port() -> Result<()> {
    let server = NameServer::start(test_config()).await?;
    let addr = server.local_addr();
    server.shutdown().await;
    server.shutdown().await;
    let refused = tokio::net::TcpStream::connect(addr).await;
    assert!(refused.is_err(), "the port should be closed after shutdown");
    Ok(())
}
