//! raftmq's bytes read by an independent implementation, `rocketmq-protocol` 1.0.0 (mxsm/rocketmq-rust,
//! ported from the Java client), and its bytes read by ours.
//!
//! - Frames: our JSON and ROCKETMQ encodings decode with its `RemotingCommand::decode`; its encodings
//!   decode with ours; code, opaque, flag, remark, extFields and body survive both ways.
//! - Routes: a real raftmq NameServer, three Raft nodes of one group registering with term and role;
//!   the GET_ROUTEINFO_BY_TOPIC body decodes with its `TopicRouteData` and points id 0 at the leader.
//! - Records: CommitLog records from our codec decode with its `decode_message_frame`.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use bytes::BytesMut;
use raftmq_common::message::model::Message;
use raftmq_common::message::model::MessageExt;
use raftmq_common::message::properties;
use raftmq_common::message::record::encode_record;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::SerializeType;
use raftmq_common::protocol::body::register::RegisterBrokerBody;
use raftmq_common::protocol::body::register::TopicConfigSerializeWrapper;
use raftmq_common::protocol::body::topic::DataVersion;
use raftmq_common::protocol::body::topic::TopicConfig;
use raftmq_common::protocol::header::namesrv::GetRouteInfoRequestHeader;
use raftmq_common::protocol::header::namesrv::RaftRegistration;
use raftmq_common::protocol::header::namesrv::RaftRole;
use raftmq_common::protocol::header::namesrv::RegisterBrokerRequestHeader;
use raftmq_common::remoting::RemotingClient;
use raftmq_namesrv::config::NamesrvConfig;
use raftmq_namesrv::server::NameServer;
use rocketmq_protocol::protocol::body::message_codec::decode_message_frame;
use rocketmq_protocol::protocol::route::topic_route_data::TopicRouteData as TheirRoute;

const TIMEOUT: Duration = Duration::from_secs(5);

fn sample(serialize_type: SerializeType) -> RemotingCommand {
    let mut cmd = RemotingCommand::request(RequestCode::PullMessage).with_body(Bytes::from_static(b"\x00\x01body"));
    cmd.opaque = 4242;
    cmd.serialize_type = serialize_type;
    cmd.remark = Some("héllo remark".into());
    for (k, v) in [("consumerGroup", "cg"), ("topic", "TopicTest"), ("queueId", "3"), ("queueOffset", "17")] {
        cmd.ext_fields.insert(k.into(), v.into());
    }
    cmd
}

#[test]
fn our_frames_decode_with_rocketmq_rust() {
    for serialize_type in [SerializeType::Json, SerializeType::RocketMq] {
        let ours = sample(serialize_type);
        let mut wire = ours.encode().expect("encodes");
        let theirs = rocketmq_protocol::RemotingCommand::decode(&mut wire)
            .expect("their decoder accepts our frame")
            .expect("one whole frame");
        assert!(wire.is_empty(), "{serialize_type:?}: their decoder consumed exactly our frame");
        assert_eq!(theirs.code(), RequestCode::PullMessage.as_i32());
        assert_eq!(theirs.opaque(), 4242);
        assert_eq!(theirs.remark().map(|r| r.as_str()), Some("héllo remark"));
        assert_eq!(theirs.body().map(|b| &b[..]), Some(&b"\x00\x01body"[..]));
        let ext: BTreeMap<String, String> =
            theirs.ext_fields().expect("ext fields").iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let expected: BTreeMap<String, String> =
            ours.ext_fields.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        assert_eq!(ext, expected, "{serialize_type:?}");
    }
}

#[test]
fn rocketmq_rust_frames_decode_with_ours() {
    for their_type in
        [rocketmq_protocol::protocol::SerializeType::JSON, rocketmq_protocol::protocol::SerializeType::ROCKETMQ]
    {
        let mut theirs =
            rocketmq_protocol::RemotingCommand::create_remoting_command(RequestCode::SendMessageV2.as_i32())
                .set_opaque(77)
                .set_serialize_type(their_type)
                .set_remark("from rust")
                .set_body(Bytes::from_static(b"payload"));
        theirs.add_ext_field("a", "producer-group");
        theirs.add_ext_field("b", "TopicTest");
        let mut wire = BytesMut::new();
        theirs.try_fast_header_encode(&mut wire).expect("they encode");
        wire.extend_from_slice(b"payload");

        let ours = RemotingCommand::decode(&wire).expect("our decoder accepts their frame");
        assert_eq!(ours.request_code(), RequestCode::SendMessageV2);
        assert_eq!(ours.opaque, 77);
        assert_eq!(ours.remark.as_deref(), Some("from rust"));
        assert_eq!(&ours.body[..], b"payload");
        assert_eq!(ours.ext_fields.get("a").map(|v| v.as_str()), Some("producer-group"));
        assert_eq!(ours.ext_fields.get("b").map(|v| v.as_str()), Some("TopicTest"));
    }
}

fn node_addr(id: u64) -> String {
    format!("127.0.0.{}:10911", id + 2)
}

async fn register(client: &RemotingClient, namesrv: &str, id: u64, term: u64, role: RaftRole) {
    let mut wrapper = TopicConfigSerializeWrapper {
        data_version: DataVersion { counter: 1, timestamp: 1_700_000_000_000 },
        ..Default::default()
    };
    let topic = TopicConfig { read_queue_nums: 8, write_queue_nums: 8, ..TopicConfig::new("TopicTest") };
    wrapper.topic_config_table.insert("TopicTest".to_owned(), topic);
    let body = RegisterBrokerBody { filter_server_list: vec![], topic_config_serialize_wrapper: wrapper }
        .encode_body(false)
        .expect("body encodes");
    let header = RegisterBrokerRequestHeader {
        broker_name: "broker-a".into(),
        broker_addr: node_addr(id),
        cluster_name: "DefaultCluster".into(),
        ha_server_addr: format!("127.0.0.{}:40911", id + 2),
        broker_id: if role == RaftRole::Leader { 0 } else { id as i64 + 1 },
        heartbeat_timeout_millis: None,
        compressed: false,
        body_crc32: raftmq_common::protocol::body::register::body_crc32(&body),
        raft: Some(RaftRegistration { term, role, node_id: id }),
    };
    let request = RemotingCommand::request_with_header(RequestCode::RegisterBroker, &header).with_body(body);
    let response = client.invoke(namesrv, request, TIMEOUT).await.expect("the NameServer answers");
    assert_eq!(response.response_code(), ResponseCode::Success, "{:?}", response.remark);
}

async fn their_route(client: &RemotingClient, namesrv: &str) -> TheirRoute {
    let header = GetRouteInfoRequestHeader { topic: "TopicTest".into(), accept_standard_json_only: Some(true) };
    let request = RemotingCommand::request_with_header(RequestCode::GetRouteinfoByTopic, &header);
    let response = client.invoke(namesrv, request, TIMEOUT).await.expect("the NameServer answers");
    assert_eq!(response.response_code(), ResponseCode::Success, "{:?}", response.remark);
    TheirRoute::decode(&response.body).expect("rocketmq-rust decodes our TopicRouteData")
}

fn leader_addr(route: &TheirRoute) -> Option<String> {
    route.broker_datas[0].broker_addrs().get(&0).map(|a| a.to_string())
}

#[tokio::test]
async fn routes_decode_with_rocketmq_rust_and_follow_the_newest_leader() {
    let config = NamesrvConfig {
        listen_port: 0,
        bind_address: "127.0.0.1".into(),
        kv_config_path: String::new(),
        ..NamesrvConfig::default()
    };
    let namesrv = NameServer::start(config).await.expect("the NameServer starts");
    let addr = namesrv.local_addr().to_string();
    let nodes: Vec<RemotingClient> = (0..3).map(|_| RemotingClient::new()).collect();

    // Term 1: node 0 leads.
    register(&nodes[0], &addr, 0, 1, RaftRole::Leader).await;
    register(&nodes[1], &addr, 1, 1, RaftRole::Follower).await;
    register(&nodes[2], &addr, 2, 1, RaftRole::Follower).await;
    let route = their_route(&nodes[0], &addr).await;
    assert_eq!(route.queue_datas.len(), 1);
    assert_eq!(route.queue_datas[0].write_queue_nums(), 8);
    assert_eq!(route.broker_datas[0].broker_addrs().len(), 3, "leader and two followers");
    assert_eq!(leader_addr(&route), Some(node_addr(0)));

    // Term 2: node 2 leads; node 0's late term-1 heartbeat must not take id 0 back.
    register(&nodes[2], &addr, 2, 2, RaftRole::Leader).await;
    register(&nodes[0], &addr, 0, 1, RaftRole::Leader).await;
    let route = their_route(&nodes[1], &addr).await;
    assert_eq!(leader_addr(&route), Some(node_addr(2)));

    for client in &nodes {
        client.close().await;
    }
    namesrv.shutdown().await;
}

#[test]
fn our_records_decode_with_rocketmq_rust() {
    let mut message = Message::new("TopicTest", &b"Hello RocketMQ"[..]);
    message.properties.insert(properties::TAGS, "TagA");
    message.properties.insert(properties::KEYS, "order-1 order-2");
    message.properties.insert(properties::UNIQ_KEY, "C0A8011400002A9F0000000000000000");
    let ours = MessageExt {
        message,
        queue_id: 5,
        queue_offset: 12,
        commit_log_offset: 4096,
        born_timestamp: 1_700_000_000_000,
        born_host: "192.168.1.20:50000".parse().unwrap(),
        store_timestamp: 1_700_000_000_123,
        store_host: "[2001:db8::1]:10911".parse().unwrap(),
        reconsume_times: 2,
        ..MessageExt::default()
    };
    let mut bytes = encode_record(&ours).expect("encodes").freeze();
    let theirs = decode_message_frame(&mut bytes).expect("rocketmq-rust decodes our record");
    assert!(bytes.is_empty(), "their decoder consumed exactly one record");
    assert_eq!(theirs.topic.as_str(), "TopicTest");
    assert_eq!(&theirs.body[..], b"Hello RocketMQ");
    assert_eq!(theirs.queue_id, 5);
    assert_eq!(theirs.queue_offset, 12);
    assert_eq!(theirs.commit_log_offset, 4096);
    assert_eq!(theirs.reconsume_times, 2);
    assert_eq!(theirs.born_host, ours.born_host);
    assert_eq!(theirs.store_host, ours.store_host);
    let props: BTreeMap<String, String> =
        theirs.properties.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    assert_eq!(props.get("TAGS").map(|v| v.as_str()), Some("TagA"));
    assert_eq!(props.get("KEYS").map(|v| v.as_str()), Some("order-1 order-2"));
    assert_eq!(props.len(), 3);
}
