//! Handler tests without sockets: commands in, commands out.

use std::collections::BTreeSet;

use raftmq_common::protocol::body::register::ClusterInfo;
use raftmq_common::protocol::body::register::KvTable;
use raftmq_common::protocol::body::register::TopicConfigSerializeWrapper;
use raftmq_common::protocol::body::register::TopicList;
use raftmq_common::protocol::body::route::TopicRouteData;
use raftmq_common::protocol::body::topic::DataVersion;
use raftmq_common::protocol::body::topic::TopicConfig;
use raftmq_common::protocol::body::topic::perm;
use raftmq_common::protocol::header::namesrv::RaftRegistration;
use raftmq_common::protocol::header::namesrv::RaftRole;

use super::*;

fn config() -> NamesrvConfig {
    NamesrvConfig { kv_config_path: String::new(), ..NamesrvConfig::default() }
}

fn processor_with(config: &NamesrvConfig) -> NamesrvProcessor {
    NamesrvProcessor::new(config, KvConfigManager::load(config.kv_config_file()).expect("kv"))
}

fn addr(node: u64) -> String {
    format!("127.0.0.1:{}", 10911 + node * 10)
}

fn register_header(node: u64, term: u64, role: RaftRole) -> RegisterBrokerRequestHeader {
    RegisterBrokerRequestHeader {
        broker_name: "broker-a".into(),
        broker_addr: addr(node),
        cluster_name: "DefaultCluster".into(),
        ha_server_addr: addr(node),
        broker_id: if role == RaftRole::Leader { 0 } else { node as i64 + 1 },
        heartbeat_timeout_millis: None,
        compressed: false,
        body_crc32: 0,
        raft: Some(RaftRegistration { term, role, node_id: node }),
    }
}

fn body(topics: &[&str]) -> RegisterBrokerBody {
    let mut wrapper =
        TopicConfigSerializeWrapper { data_version: DataVersion { counter: 1, timestamp: 42 }, ..Default::default() };
    for t in topics {
        let config = TopicConfig { read_queue_nums: 4, write_queue_nums: 4, ..TopicConfig::new(*t) };
        wrapper.topic_config_table.insert((*t).to_owned(), config);
    }
    RegisterBrokerBody { filter_server_list: vec![], topic_config_serialize_wrapper: wrapper }
}

fn register(node: u64, term: u64, role: RaftRole, compressed: bool) -> RemotingCommand {
    let mut h = register_header(node, term, role);
    h.compressed = compressed;
    let bytes = body(&["TopicA"]).encode_body(compressed).expect("body");
    h.body_crc32 = body_crc32(&bytes);
    let mut cmd = RemotingCommand::request_with_header(RequestCode::RegisterBroker, &h).with_body(bytes);
    cmd.opaque = 7;
    cmd
}

fn route_request(topic: &str) -> RemotingCommand {
    RemotingCommand::request_with_header(
        RequestCode::GetRouteinfoByTopic,
        &GetRouteInfoRequestHeader { topic: topic.into(), accept_standard_json_only: None },
    )
}

fn ok(response: &RemotingCommand) {
    assert_eq!(response.response_code(), ResponseCode::Success, "remark: {:?}", response.remark);
}

#[test]
fn register_json_then_route_lookup() {
    let p = processor_with(&config());
    let response = p.handle(Some(1), &register(0, 1, RaftRole::Leader, false));
    ok(&response);
    assert!(response.is_response());
    assert_eq!(response.opaque, 7);
    let route = p.handle(None, &route_request("TopicA"));
    ok(&route);
    let route = TopicRouteData::decode(&route.body).expect("route");
    assert_eq!(route.broker_datas[0].broker_addrs.get(&0), Some(&addr(0)));
    assert_eq!(route.queue_datas[0].write_queue_nums, 4);
}

#[test]
fn register_compressed_and_followers_learn_the_master() {
    let p = processor_with(&config());
    ok(&p.handle(Some(1), &register(0, 1, RaftRole::Leader, true)));
    let response = p.handle(Some(2), &register(1, 1, RaftRole::Follower, true));
    ok(&response);
    let h: RegisterBrokerResponseHeader = response.decode_header().expect("header");
    assert_eq!(h.master_addr, Some(addr(0)));
    assert_eq!(p.routes().broker_data("broker-a").expect("group").broker_addrs.len(), 2);
}

#[test]
fn bad_registrations_get_system_error_with_a_remark() {
    let p = processor_with(&config());
    let mut crc = register(0, 1, RaftRole::Leader, false);
    crc.ext_fields.insert("bodyCrc32".into(), "12345".into());
    let r = p.handle(Some(1), &crc);
    assert_eq!(r.response_code(), ResponseCode::SystemError);
    assert!(r.remark.as_deref().unwrap_or_default().contains("crc32"), "{:?}", r.remark);

    let mut missing = register(0, 1, RaftRole::Leader, false);
    missing.ext_fields.shift_remove("brokerName");
    let r = p.handle(Some(1), &missing);
    assert_eq!(r.response_code(), ResponseCode::SystemError);
    assert!(r.remark.as_deref().unwrap_or_default().contains("brokerName"), "{:?}", r.remark);

    let mut malformed = register(0, 1, RaftRole::Leader, false);
    malformed.ext_fields.shift_remove("bodyCrc32");
    let malformed = malformed.with_body(&b"{\"topicConfigSerializeWrapper\":"[..]);
    let r = p.handle(Some(1), &malformed);
    assert_eq!(r.response_code(), ResponseCode::SystemError);
    assert!(r.remark.as_deref().unwrap_or_default().contains("body"), "{:?}", r.remark);

    let mut garbage = register(0, 1, RaftRole::Leader, true);
    garbage.ext_fields.shift_remove("bodyCrc32");
    let garbage = garbage.with_body(&b"not zlib at all"[..]);
    assert_eq!(p.handle(Some(1), &garbage).response_code(), ResponseCode::SystemError);

    let mut empty_name = register(0, 1, RaftRole::Leader, false);
    empty_name.ext_fields.insert("brokerName".into(), "".into());
    assert_eq!(p.handle(Some(1), &empty_name).response_code(), ResponseCode::SystemError);

    assert_eq!(p.routes().live_broker_count(), 0, "nothing was registered");
    // The processor still serves.
    ok(&p.handle(Some(1), &register(0, 1, RaftRole::Leader, false)));
}

#[test]
fn register_without_body_is_an_empty_table() {
    let p = processor_with(&config());
    let cmd =
        RemotingCommand::request_with_header(RequestCode::RegisterBroker, &register_header(0, 1, RaftRole::Leader));
    ok(&p.handle(Some(1), &cmd));
    assert_eq!(p.routes().leader_of("broker-a"), Some(addr(0).as_str()));
    assert_eq!(p.routes().topic_count(), 0);
}

#[test]
fn unknown_code_and_unknown_topic() {
    let p = processor_with(&config());
    let r = p.handle(None, &RemotingCommand::request(RequestCode::Unknown(9_999)));
    assert_eq!(r.response_code(), ResponseCode::RequestCodeNotSupported);
    assert!(r.remark.is_some());
    let r = p.handle(None, &route_request("Nope"));
    assert_eq!(r.response_code(), ResponseCode::TopicNotExist);
    assert!(r.remark.as_deref().unwrap_or_default().contains("Nope"));
    let r = p.handle(None, &RemotingCommand::request(RequestCode::GetRouteinfoByTopic));
    assert_eq!(r.response_code(), ResponseCode::SystemError);
    assert!(r.remark.as_deref().unwrap_or_default().contains("topic"));
}

#[test]
fn cluster_info_topic_lists_delete_and_unregister() {
    let p = processor_with(&config());
    ok(&p.handle(Some(1), &register(0, 1, RaftRole::Leader, false)));
    let r = p.handle(None, &RemotingCommand::request(RequestCode::GetBrokerClusterInfo));
    ok(&r);
    let info = ClusterInfo::decode(&r.body).expect("cluster info");
    assert!(info.cluster_addr_table["DefaultCluster"].contains("broker-a"));

    let r = p.handle(None, &RemotingCommand::request(RequestCode::GetAllTopicListFromNameserver));
    ok(&r);
    assert!(TopicList::decode(&r.body).expect("list").topic_list.contains("TopicA"));
    let by_cluster = RemotingCommand::request_with_header(
        RequestCode::GetTopicsByCluster,
        &GetTopicsByClusterRequestHeader { cluster: "DefaultCluster".into() },
    );
    let r = p.handle(None, &by_cluster);
    ok(&r);
    assert!(TopicList::decode(&r.body).expect("list").topic_list.contains("TopicA"));

    let delete = RemotingCommand::request_with_header(
        RequestCode::DeleteTopicInNamesrv,
        &DeleteTopicFromNamesrvRequestHeader { topic: "TopicA".into(), cluster_name: None },
    );
    ok(&p.handle(None, &delete));
    assert_eq!(p.handle(None, &route_request("TopicA")).response_code(), ResponseCode::TopicNotExist);

    let unregister = RemotingCommand::request_with_header(
        RequestCode::UnregisterBroker,
        &UnregisterBrokerRequestHeader {
            broker_name: "broker-a".into(),
            broker_addr: addr(0),
            cluster_name: "DefaultCluster".into(),
            broker_id: 0,
        },
    );
    ok(&p.handle(None, &unregister));
    assert_eq!(p.routes().live_broker_count(), 0);
}

/// `mqadmin wipeWritePerm` / `addWritePerm`: producers skip a group whose queue data lost the write
/// bit; consumers still read it. The wipe holds until the group's queue data is re-read (a new
/// topic `DataVersion` or a leader change), as in Java.
#[test]
fn write_perm_of_a_group_is_wiped_and_added_back() {
    let p = processor_with(&config());
    ok(&p.handle(Some(1), &register(0, 1, RaftRole::Leader, false)));
    let perm_of = |p: &NamesrvProcessor| {
        let route = TopicRouteData::decode(&p.handle(None, &route_request("TopicA")).body).expect("route");
        route.queue_datas[0].perm
    };
    assert_eq!(perm_of(&p), perm::READ_WRITE);

    let wipe = |name: &str| {
        RemotingCommand::request_with_header(
            RequestCode::WipeWritePermOfBroker,
            &WipeWritePermOfBrokerRequestHeader { broker_name: name.into() },
        )
    };
    let r = p.handle(None, &wipe("broker-a"));
    ok(&r);
    let h: WipeWritePermOfBrokerResponseHeader = r.decode_header().expect("header");
    assert_eq!(h.wipe_topic_count, 1);
    assert_eq!(perm_of(&p), perm::READ);
    // An unknown group changes nothing and says so with a zero count, as Java does.
    let h: WipeWritePermOfBrokerResponseHeader = p.handle(None, &wipe("broker-x")).decode_header().expect("header");
    assert_eq!(h.wipe_topic_count, 0);
    // The leader's periodic registration with the same DataVersion keeps the wipe.
    ok(&p.handle(Some(1), &register(0, 1, RaftRole::Leader, false)));
    assert_eq!(perm_of(&p), perm::READ);

    let add = RemotingCommand::request_with_header(
        RequestCode::AddWritePermOfBroker,
        &AddWritePermOfBrokerRequestHeader { broker_name: "broker-a".into() },
    );
    let r = p.handle(None, &add);
    ok(&r);
    let h: AddWritePermOfBrokerResponseHeader = r.decode_header().expect("header");
    assert_eq!(h.add_topic_count, 1);
    assert_eq!(perm_of(&p), perm::READ_WRITE);

    // A leader change re-reads the group's table: the wipe is gone with it.
    ok(&p.handle(None, &wipe("broker-a")));
    ok(&p.handle(Some(2), &register(1, 2, RaftRole::Leader, false)));
    assert_eq!(perm_of(&p), perm::READ_WRITE);
    p.routes().check_invariants();
}

#[test]
fn topic_lists_can_be_disabled() {
    let p = processor_with(&NamesrvConfig { enable_all_topic_list: false, enable_topic_list: false, ..config() });
    let r = p.handle(None, &RemotingCommand::request(RequestCode::GetAllTopicListFromNameserver));
    assert_eq!(r.response_code(), ResponseCode::SystemError);
    let by_cluster = RemotingCommand::request_with_header(
        RequestCode::GetTopicsByCluster,
        &GetTopicsByClusterRequestHeader { cluster: "c".into() },
    );
    assert_eq!(p.handle(None, &by_cluster).response_code(), ResponseCode::SystemError);
}

/// The dashboard's topic page asks for the system topics first and fails on anything but SUCCESS.
#[test]
fn system_topic_list_names_clusters_groups_and_a_leader() {
    let p = processor_with(&config());
    let r = p.handle(None, &RemotingCommand::request(RequestCode::GetSystemTopicListFromNs));
    ok(&r);
    let empty = TopicList::decode(&r.body).expect("list");
    assert!(empty.topic_list.is_empty());
    assert_eq!(empty.broker_addr, None);

    ok(&p.handle(Some(2), &register(1, 1, RaftRole::Follower, false)));
    ok(&p.handle(Some(1), &register(0, 1, RaftRole::Leader, false)));
    let r = p.handle(None, &RemotingCommand::request(RequestCode::GetSystemTopicListFromNs));
    ok(&r);
    let list = TopicList::decode(&r.body).expect("list");
    let expected: BTreeSet<String> = ["DefaultCluster", "broker-a"].into_iter().map(str::to_owned).collect();
    assert_eq!(list.topic_list, expected);
    assert_eq!(list.broker_addr, Some(addr(0)), "the leader's address, where the broker's own list is asked");
}

/// `mqadmin getNamesrvConfig` / `updateNamesrvConfig`: runtime keys change at once, all or none;
/// restart-only keys, Java's black-listed paths, unknown keys and bad values are refused by name.
#[test]
fn namesrv_config_is_read_and_updated_at_runtime() {
    let p = processor_with(&config());
    let get = || {
        let r = p.handle(None, &RemotingCommand::request(RequestCode::GetNamesrvConfig));
        ok(&r);
        properties_text::decode(std::str::from_utf8(&r.body).expect("utf-8"))
    };
    let before = get();
    assert_eq!(before["listenPort"], "9876");
    assert_eq!(before["brokerChannelExpiredTime"], "120000", "durations in ms, as Java's interval keys");
    assert_eq!(before["enableAllTopicList"], "true");

    let update = |text: &str| {
        p.handle(None, &RemotingCommand::request(RequestCode::UpdateNamesrvConfig).with_body(text.as_bytes().to_vec()))
    };
    ok(&update("enableAllTopicList=false\nbrokerChannelExpiredTime=30000\n"));
    let after = get();
    assert_eq!(after["enableAllTopicList"], "false");
    assert_eq!(after["brokerChannelExpiredTime"], "30000");
    let r = p.handle(None, &RemotingCommand::request(RequestCode::GetAllTopicListFromNameserver));
    assert_eq!(r.response_code(), ResponseCode::SystemError, "the switch took effect");

    for (text, code, named) in [
        ("listenPort=9999", ResponseCode::NoPermission, "listenPort"),
        ("kvConfigPath=/tmp/x", ResponseCode::NoPermission, "kvConfigPath"),
        ("enableTopicList=false\nnoSuchKey=1", ResponseCode::SystemError, "noSuchKey"),
        ("brokerChannelExpiredTime=0", ResponseCode::SystemError, "brokerChannelExpiredTime"),
        ("enableTopicList=maybe", ResponseCode::SystemError, "enableTopicList"),
    ] {
        let r = update(text);
        assert_eq!(r.response_code(), code, "{text}: {:?}", r.remark);
        assert!(r.remark.as_deref().unwrap_or_default().contains(named), "{text}: {:?}", r.remark);
    }
    assert_eq!(get(), after, "a refused update changes nothing");
    let r = p.handle(None, &RemotingCommand::request(RequestCode::UpdateNamesrvConfig).with_body(vec![0xff, 0xfe]));
    assert_eq!(r.response_code(), ResponseCode::SystemError);
}

#[test]
fn kv_config_codes_and_order_topic_conf() {
    let p = processor_with(&NamesrvConfig { order_message_enable: true, ..config() });
    let put = RemotingCommand::request_with_header(
        RequestCode::PutKvConfig,
        &PutKvConfigRequestHeader {
            namespace: NAMESPACE_ORDER_TOPIC_CONFIG.into(),
            key: "TopicA".into(),
            value: "broker-a:4".into(),
        },
    );
    ok(&p.handle(None, &put));
    let get = RemotingCommand::request_with_header(
        RequestCode::GetKvConfig,
        &GetKvConfigRequestHeader { namespace: NAMESPACE_ORDER_TOPIC_CONFIG.into(), key: "TopicA".into() },
    );
    let r = p.handle(None, &get);
    ok(&r);
    let value: GetKvConfigResponseHeader = r.decode_header().expect("header");
    assert_eq!(value.value.as_deref(), Some("broker-a:4"));

    // REGISTER_BROKER answers with the ORDER_TOPIC_CONFIG table; routes carry orderTopicConf.
    let r = p.handle(Some(1), &register(0, 1, RaftRole::Leader, false));
    ok(&r);
    assert_eq!(KvTable::decode(&r.body).expect("kv").table["TopicA"], "broker-a:4");
    let route = TopicRouteData::decode(&p.handle(None, &route_request("TopicA")).body).expect("route");
    assert_eq!(route.order_topic_conf.as_deref(), Some("broker-a:4"));

    let list = RemotingCommand::request_with_header(
        RequestCode::GetKvlistByNamespace,
        &GetKvListByNamespaceRequestHeader { namespace: NAMESPACE_ORDER_TOPIC_CONFIG.into() },
    );
    let r = p.handle(None, &list);
    ok(&r);
    assert_eq!(KvTable::decode(&r.body).expect("kv").table.len(), 1);

    let delete = RemotingCommand::request_with_header(
        RequestCode::DeleteKvConfig,
        &DeleteKvConfigRequestHeader { namespace: NAMESPACE_ORDER_TOPIC_CONFIG.into(), key: "TopicA".into() },
    );
    ok(&p.handle(None, &delete));
    assert_eq!(p.handle(None, &get).response_code(), ResponseCode::QueryNotFound);
    assert_eq!(p.handle(None, &list).response_code(), ResponseCode::QueryNotFound);
}

#[test]
fn connection_close_and_expiry_go_through_the_tables() {
    let p = processor_with(&config());
    ok(&p.handle(Some(5), &register(0, 1, RaftRole::Leader, false)));
    assert!(p.scan_not_active_brokers().is_empty());
    assert_eq!(p.connection_closed(5).len(), 1);
    assert_eq!(p.routes().live_broker_count(), 0);
}

/// QUERY_DATA_VERSION (`needRegister`): unchanged for the version just registered (and the broker
/// counts as alive), changed for another version or an unknown broker; a bad body is refused.
#[test]
fn data_version_query_says_whether_a_broker_must_register() {
    let p = processor_with(&config());
    ok(&p.handle(Some(1), &register(1, 3, RaftRole::Leader, false)));
    let query = |addr: String, version: DataVersion| {
        let h = QueryDataVersionRequestHeader {
            broker_name: "broker-a".into(),
            broker_addr: addr,
            cluster_name: "DefaultCluster".into(),
            broker_id: 0,
        };
        RemotingCommand::request_with_header(RequestCode::QueryDataVersion, &h)
            .with_body(version.encode().expect("version"))
    };
    let registered = DataVersion { counter: 1, timestamp: 42 };
    let r = p.handle(None, &query(addr(1), registered));
    ok(&r);
    let h: QueryDataVersionResponseHeader = r.decode_header().expect("header");
    assert!(!h.changed);
    assert_eq!(DataVersion::decode(&r.body).expect("held"), registered);
    let r = p.handle(None, &query(addr(1), DataVersion { counter: 2, timestamp: 43 }));
    assert!(r.decode_header::<QueryDataVersionResponseHeader>().expect("header").changed);
    assert_eq!(DataVersion::decode(&r.body).expect("held"), registered);
    let r = p.handle(None, &query(addr(9), registered));
    assert!(r.decode_header::<QueryDataVersionResponseHeader>().expect("header").changed);
    assert!(r.body.is_empty(), "nothing held for an unknown broker");
    let bad = query(addr(1), registered).with_body(&b"{not json"[..]);
    assert_eq!(p.handle(None, &bad).response_code(), ResponseCode::SystemError);
    assert_eq!(
        p.handle(None, &RemotingCommand::request(RequestCode::QueryDataVersion)).response_code(),
        ResponseCode::SystemError
    );
}

/// The unit topic lists pick topics by their first group's sysFlag, as Java's do.
#[test]
fn unit_topic_lists_select_by_sys_flag() {
    let p = processor_with(&config());
    let mut wrapper =
        TopicConfigSerializeWrapper { data_version: DataVersion { counter: 1, timestamp: 42 }, ..Default::default() };
    for (name, flag) in [("Plain", 0), ("Unit", 1), ("UnitSub", 2), ("Both", 3)] {
        let config =
            TopicConfig { topic_sys_flag: flag, read_queue_nums: 1, write_queue_nums: 1, ..TopicConfig::new(name) };
        wrapper.topic_config_table.insert(name.to_owned(), config);
    }
    let mut h = register_header(1, 3, RaftRole::Leader);
    let bytes = RegisterBrokerBody { filter_server_list: vec![], topic_config_serialize_wrapper: wrapper }
        .encode_body(false)
        .expect("body");
    h.body_crc32 = body_crc32(&bytes);
    ok(&p.handle(Some(1), &RemotingCommand::request_with_header(RequestCode::RegisterBroker, &h).with_body(bytes)));
    let list = |code| {
        let r = p.handle(None, &RemotingCommand::request(code));
        ok(&r);
        TopicList::decode(&r.body).expect("list").topic_list.into_iter().collect::<Vec<_>>()
    };
    assert_eq!(list(RequestCode::GetUnitTopicList), ["Both", "Unit"]);
    assert_eq!(list(RequestCode::GetHasUnitSubTopicList), ["Both", "UnitSub"]);
    assert_eq!(list(RequestCode::GetHasUnitSubUnunitTopicList), ["UnitSub"]);
    let off = processor_with(&NamesrvConfig { enable_topic_list: false, ..config() });
    let r = off.handle(None, &RemotingCommand::request(RequestCode::GetUnitTopicList));
    assert_eq!(r.response_code(), ResponseCode::SystemError);
}

#[test]
fn with_a_cluster_secret_member_codes_need_its_signature_and_reads_stay_open() {
    use raftmq_common::protocol::cluster_signature::ClusterSigner;
    use raftmq_common::protocol::cluster_signature::wall_clock_ms;
    use raftmq_common::protocol::header::namesrv::PutKvConfigRequestHeader;

    let key = ClusterKey::new(b"the cluster secret of this test");
    let p = processor_with(&config()).with_cluster_key(Some(key.clone()));
    let member = ClusterSigner::new(key, "127.0.0.1:10911");
    let outsider = ClusterSigner::new(ClusterKey::new(b"a guess at the cluster secret"), "x");

    // Unsigned or wrongly signed: refused, nothing registered.
    let forged_leader = register(9, u64::MAX, RaftRole::Leader, false);
    let mut wrong = forged_leader.clone();
    outsider.sign(&mut wrong, wall_clock_ms());
    for r in [&forged_leader, &wrong] {
        let response = p.handle(None, r);
        assert_eq!(response.response_code(), ResponseCode::NoPermission, "{:?}", response.remark);
        assert_eq!(response.opaque, 7, "answers the request");
    }
    assert_eq!(p.handle(None, &route_request("TopicA")).response_code(), ResponseCode::TopicNotExist);

    // Signed: registered; the same signed frame replayed is refused.
    let mut signed = register(1, 3, RaftRole::Leader, false);
    member.sign(&mut signed, wall_clock_ms());
    ok(&p.handle(None, &signed));
    assert_eq!(p.handle(None, &signed).response_code(), ResponseCode::NoPermission, "replay");

    // Reads need no signature.
    ok(&p.handle(None, &route_request("TopicA")));
    ok(&p.handle(None, &RemotingCommand::request(RequestCode::GetBrokerClusterInfo)));

    // Every member code is refused unsigned, before its header is read.
    for code in MEMBER_CODES {
        let response = p.handle(None, &RemotingCommand::request(code));
        assert_eq!(response.response_code(), ResponseCode::NoPermission, "{code}");
    }
    let put = |value: &str| {
        let h = PutKvConfigRequestHeader { namespace: "ns".into(), key: "k".into(), value: value.into() };
        RemotingCommand::request_with_header(RequestCode::PutKvConfig, &h)
    };
    assert_eq!(p.handle(None, &put("v")).response_code(), ResponseCode::NoPermission);
    let mut signed_put = put("v");
    member.sign(&mut signed_put, wall_clock_ms());
    ok(&p.handle(None, &signed_put));
    let mut too_large = put(&"v".repeat(raftmq_common::limits::KV_CONFIG_VALUE_MAX_BYTES + 1));
    member.sign(&mut too_large, wall_clock_ms());
    assert_eq!(p.handle(None, &too_large).response_code(), ResponseCode::MessageIllegal);
}

#[test]
fn config_beyond_loopback_needs_a_secret_and_masks_it() {
    let open = NamesrvConfig { bind_address: "0.0.0.0".into(), ..config() };
    let e = open.validate().expect_err("refused").to_string();
    assert!(e.contains("clusterSecretFile") && e.contains("bindAddress 0.0.0.0"), "{e}");
    NamesrvConfig { insecure_cluster_without_secret: true, ..open.clone() }.validate().expect("opt-out");
    let secret = NamesrvConfig { cluster_secret: "0123456789abcdef0123".into(), ..open.clone() };
    secret.validate().expect("with a secret");
    assert_eq!(secret.to_properties().get("clusterSecret").map(String::as_str), Some(crate::config::SECRET_MASK));
    assert!(!secret.to_toml_string().contains("0123456789abcdef0123"));
    NamesrvConfig { cluster_secret: "short".into(), ..open }.validate().expect_err("too short");
    config().validate().expect("loopback by default");
}
