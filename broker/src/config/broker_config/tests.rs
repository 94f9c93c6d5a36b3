//! Tests of BrokerConfig: files (TOML and Java properties), overrides, validation, masking.

use super::*;

const THREE_NODES: &str = r#"
brokerName = "broker-b"
brokerIP1 = "10.0.0.2"
namesrvAddr = "10.0.0.9:9876;10.0.0.10:9876"
clusterSecret = "0123456789abcdef0123456789abcdef"
raftSelfId = 1

[[raftPeers]]
id = 0
remotingAddr = "10.0.0.1:10911"
raftAddr = "10.0.0.1:40911"

[[raftPeers]]
id = 1
remotingAddr = "10.0.0.2:10911"
raftAddr = "10.0.0.2:40911"

[[raftPeers]]
id = 2
remotingAddr = "10.0.0.3:10911"
raftAddr = "10.0.0.3:40911"
"#;

#[test]
fn the_tail_a_pull_counts_as_cached_is_access_message_in_memory_max_ratio_of_ram() {
    const GIB: u64 = 1 << 30;
    // Java's default, 40 % of a 24 GiB machine: a 1 M x 1 KiB backlog (≈ 1.2 GB) is "in memory".
    let limits = BrokerConfig::default().pull_limits(24 * GIB);
    assert_eq!(limits.memory_bytes, (24 * GIB * 40 / 100) as i64);
    assert_eq!(
        (limits.max_transfer_count_in_memory, limits.max_transfer_bytes_in_memory),
        (32, 256 * 1024),
        "the transfer keys' defaults"
    );
    assert_eq!((limits.max_transfer_count_in_disk, limits.max_transfer_bytes_in_disk), (8, 64 * 1024));
    // The key was read and validated but never used: every broker assumed a fixed 4 GiB.
    let one_percent = BrokerConfig { access_message_in_memory_max_ratio: 1, ..BrokerConfig::default() };
    assert_eq!(one_percent.pull_limits(24 * GIB).memory_bytes, (24 * GIB / 100) as i64);
    let all = BrokerConfig { access_message_in_memory_max_ratio: 100, ..BrokerConfig::default() };
    assert_eq!(all.pull_limits(u64::MAX).memory_bytes, i64::MAX, "no overflow");
}

#[test]
fn the_properties_read_out_shows_durations_in_ms_and_masks_secrets() {
    let config = BrokerConfig { admin_token: Some("hunter2".into()), ..BrokerConfig::default() };
    let props = config.to_properties().unwrap();
    assert_eq!(props["transactionTimeOut"], "6000");
    assert_eq!(props["registerNameServerPeriod"], "30000");
    assert_eq!(props["adminToken"], SECRET_MASK);
    assert_eq!(props["brokerName"], "broker-a");
    assert!(props["raftPeers"].starts_with("[{"), "{}", props["raftPeers"]);
    // Every duration is listed in DURATION_KEYS (none is left in TOML's `6s` form) ...
    for (key, value) in &props {
        let looks_like_duration = value.ends_with('s') && raftmq_common::config_duration::parse(value).is_some();
        assert!(!looks_like_duration, "{key} = {value}: add it to DURATION_KEYS");
    }
    // ... and every field that sounds secret is masked.
    let toml::Value::Table(all) = toml::Value::try_from(&config).unwrap() else { panic!("a table") };
    for key in all.keys() {
        let lower = key.to_ascii_lowercase();
        if ["token", "secret", "password", "accesskey"].iter().any(|s| lower.contains(s)) {
            assert!(SECRET_KEYS.contains(&key.as_str()), "{key} sounds secret: add it to SECRET_KEYS");
        }
    }
}

#[test]
fn defaults_are_rocketmqs() {
    let c = BrokerConfig::load(None, &[]).expect("defaults validate");
    assert_eq!(c.broker_cluster_name, "DefaultCluster");
    assert_eq!(c.broker_name, "broker-a");
    assert_eq!(c.listen_port, 10911);
    assert_eq!(c.mapped_file_size_commit_log, 1 << 30);
    assert_eq!(c.consume_queue_units_per_file(), 300_000);
    assert_eq!(c.max_message_size, 4 << 20);
    assert!(c.auto_create_topic_enable);
    assert_eq!(c.default_topic_queue_nums, 8);
    assert_eq!(c.broker_permission, 6);
    assert_eq!(c.register_name_server_period, Duration::from_secs(30));
    assert_eq!(c.file_reserved(), Duration::from_secs(72 * 3600));
    assert_eq!(c.delete_when_hours().unwrap(), vec![4]);
    assert_eq!(c.disk_max_used_space_ratio, 75);
    assert_eq!((c.disk_space_clean_forcibly_ratio, c.disk_space_warning_level_ratio), (85, 90));
    assert_eq!(c.clean_resource_interval, Duration::from_secs(10));
    let short = BrokerConfig { file_reserved_time_ms: Some(1_500), ..c.clone() };
    assert_eq!(short.file_reserved(), Duration::from_millis(1_500));
    assert_eq!(c.admin_port, 8080);
    assert_eq!((c.max_hash_slot_num, c.max_index_num), (5_000_000, 20_000_000));
    assert_eq!(c.broker_addr(), "127.0.0.1:10911");
    assert_eq!(c.store_host(), Some("127.0.0.1:10911".parse().unwrap()));
    let levels = c.message_delay_levels_ms().unwrap();
    assert_eq!(levels.len(), 18);
    assert_eq!((levels[0], levels[17]), (1_000, 7_200_000));
}

#[test]
fn three_node_file_then_overrides() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("broker.toml");
    std::fs::write(&path, THREE_NODES).expect("write");
    let overrides =
        BrokerConfig::parse_overrides(["registerNameServerPeriod=10s", "deleteWhen=03;04", "adminPort=8081"])
            .expect("ok");
    let c = BrokerConfig::load(Some(&path), &overrides).expect("load");
    assert_eq!(c.self_peer().map(|p| p.id), Some(1));
    assert_eq!(c.broker_addr(), "10.0.0.2:10911");
    assert_eq!(c.namesrv_addrs().collect::<Vec<_>>(), ["10.0.0.9:9876", "10.0.0.10:9876"]);
    assert_eq!(c.register_name_server_period, Duration::from_secs(10));
    assert_eq!(c.delete_when_hours().unwrap(), vec![3, 4]);
    assert_eq!(c.admin_port, 8081);
    // The printed form reads back to the same config.
    assert_eq!(BrokerConfig::from_toml_str(&c.to_toml_string()).expect("round trip"), c);
}

#[test]
fn peers_as_an_inline_override() {
    let overrides = BrokerConfig::parse_overrides([
        "raftSelfId=7",
        r#"raftPeers=[{id=7, remotingAddr="127.0.0.1:10911", raftAddr="127.0.0.1:40917"}]"#,
    ])
    .expect("ok");
    let c = BrokerConfig::load(None, &overrides).expect("load");
    assert_eq!(c.raft_peers[0].raft_addr, "127.0.0.1:40917");
}

/// RocketMQ's `broker.conf` as Java writes it, with this group's Raft members inline.
const BROKER_CONF: &str = "# a RocketMQ 4.x broker.conf\n\
    brokerClusterName = DefaultCluster\n\
    brokerName = broker-b\n\
    brokerId = 0\n\
    deleteWhen = 04\n\
    fileReservedTime = 48\n\
    brokerRole = ASYNC_MASTER\n\
    flushDiskType = ASYNC_FLUSH\n\
    ! Java comments start with ! too\n\
    brokerIP1: 10.0.0.2\n\
    namesrvAddr=10.0.0.9:9876;10.0.0.10:9876\n\
    adminToken = 1234567890123456\n\
    clusterSecret = 0123456789abcdef0123456789abcdef\n\
    raftSelfId = 1\n\
    raftPeers = [{id=0, remotingAddr=\"10.0.0.1:10911\", raftAddr=\"10.0.0.1:40911\"}, \\\n\
      {id=1, remotingAddr=\"10.0.0.2:10911\", raftAddr=\"10.0.0.2:40911\"}, \\\n\
      {id=2, remotingAddr=\"10.0.0.3:10911\", raftAddr=\"10.0.0.3:40911\"}]\n\
    registerNameServerPeriod = 10000   \n";

#[test]
fn a_rocketmq_broker_conf_is_read_as_java_properties() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("broker.conf");
    std::fs::write(&path, BROKER_CONF).expect("write");
    let c = BrokerConfig::load(Some(&path), &[]).expect("load");
    assert_eq!(c.broker_name, "broker-b");
    assert_eq!(c.delete_when, "04", "a text key keeps its text");
    assert_eq!(c.delete_when_hours().unwrap(), vec![4]);
    assert_eq!(c.file_reserved_time, 48);
    assert_eq!(c.admin_token.as_deref(), Some("1234567890123456"), "an optional text key too");
    assert_eq!(c.self_peer().map(|p| p.id), Some(1));
    assert_eq!(c.broker_addr(), "10.0.0.2:10911");
    assert_eq!(c.raft_peers.len(), 3, "the inline list, continued over lines");
    assert_eq!(c.namesrv_addrs().collect::<Vec<_>>(), ["10.0.0.9:9876", "10.0.0.10:9876"]);
    assert_eq!(c.register_name_server_period, Duration::from_secs(10), "plain ms, trailing blanks dropped");
    // The same keys in TOML give the same config.
    let toml = dir.path().join("broker.toml");
    std::fs::write(&toml, THREE_NODES.replace("raftSelfId = 1", "raftSelfId = 1\ndeleteWhen = \"04\"\nfileReservedTime = 48\nadminToken = \"1234567890123456\"\nregisterNameServerPeriod = 10000"))
        .expect("write");
    assert_eq!(BrokerConfig::load(Some(&toml), &[]).expect("toml"), c);
}

#[test]
fn a_short_or_spaced_admin_token_is_refused() {
    for bad in ["", "short", "has a space in it ok", "0123456789abcde"] {
        let c = BrokerConfig { admin_token: Some(bad.to_owned()), ..BrokerConfig::default() };
        let err = c.validate_names().expect_err(bad).to_string();
        assert!(err.contains("adminToken"), "{err}");
    }
    let c = BrokerConfig { admin_token: Some("0123456789abcdef".to_owned()), ..BrokerConfig::default() };
    c.validate_names().expect("16 bytes");
}

#[test]
fn a_properties_file_refuses_unknown_and_dledger_keys_and_toml_tables() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("broker.conf");
    let load = |text: &str| {
        std::fs::write(&path, text).expect("write");
        BrokerConfig::load(Some(&path), &[]).unwrap_err().to_string()
    };
    assert!(load("brokerNmae = x\n").contains("brokerNmae"));
    let dledger = load("dLegerPeers = n0-127.0.0.1:40911;n1-127.0.0.1:40912\n");
    assert!(dledger.contains("dLegerPeers") && dledger.contains("raftPeers=["), "{dledger}");
    let table = load(THREE_NODES);
    assert!(table.contains("[[raftPeers]]") && table.contains("*.toml"), "{table}");
    assert!(load("listenPort = ten\n").contains("listenPort"));
    let slave = load("brokerName = broker-a\nbrokerId = 1\nbrokerRole = SLAVE\n");
    assert!(slave.contains("raftPeers"), "{slave}");
    let quoted = load("storePathRootDir = \"/data/store\"\n");
    assert!(quoted.contains("*.toml") && quoted.contains("storePathRootDir=/data/store"), "{quoted}");
    // A line that only continues a value is not a table header.
    std::fs::write(
        &path,
        "raftPeers = \\\n  [{id=0, remotingAddr=\"127.0.0.1:10911\", raftAddr=\"127.0.0.1:40911\"}]\n",
    )
    .expect("write");
    BrokerConfig::load(Some(&path), &[]).expect("a continued raftPeers line");
}

#[test]
fn a_group_of_one_is_this_broker_at_its_advertised_address() {
    let set = |k: &str, v: &str| (k.to_owned(), v.to_owned());
    let c = BrokerConfig::load(None, &[set("listenPort", "10921"), set("brokerIP1", "10.0.0.5")]).expect("load");
    assert_eq!(c.raft_peers.len(), 1);
    assert_eq!(c.raft_peers[0].remoting_addr, "10.0.0.5:10921");
    assert_eq!(c.raft_peers[0].raft_addr, "127.0.0.1:40911", "its Raft port talks to no one");
    let not_zero = BrokerConfig::load(None, &[set("raftSelfId", "1")]).unwrap_err().to_string();
    assert!(not_zero.contains("raftSelfId"), "a replica other than 0 needs its group: {not_zero}");
    assert_eq!(c.broker_addr(), "10.0.0.5:10921");
}

#[test]
fn a_text_key_override_keeps_its_text() {
    let c = BrokerConfig::load(None, &[("deleteWhen".to_owned(), "4".to_owned())]).expect("load");
    assert_eq!(c.delete_when, "4");
}

#[test]
fn tls_keys_are_rocketmqs_and_settings_that_cannot_work_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let conf = dir.path().join("broker.conf");
    std::fs::write(
        &conf,
        "tls.server.mode=enforcing\ntls.server.certPath=/t/b.pem\ntls.server.keyPath=/t/b.key\n\
         tls.enable=true\ntls.client.trustCertPath=/t/ca.pem\nadminHttpsEnable=true\n",
    )
    .expect("write");
    let c = BrokerConfig::load(Some(&conf), &[]).expect("properties");
    assert_eq!(c.tls_server().mode, TlsMode::Enforcing);
    assert_eq!(c.tls_client().and_then(|t| t.trust_cert_path), Some(PathBuf::from("/t/ca.pem")));
    assert_eq!(c.admin_https_files(), Some((PathBuf::from("/t/b.pem"), PathBuf::from("/t/b.key"))));
    let toml = dir.path().join("broker.toml");
    std::fs::write(
        &toml,
        "adminHttpsEnable = true\n[tls]\nenable = true\nclient.trustCertPath = \"/t/ca.pem\"\n\
         [tls.server]\nmode = \"enforcing\"\ncertPath = \"/t/b.pem\"\nkeyPath = \"/t/b.key\"\n",
    )
    .expect("write");
    assert_eq!(BrokerConfig::load(Some(&toml), &[]).expect("toml"), c);
    assert_eq!(BrokerConfig::from_toml_str(&c.to_toml_string()).expect("round trip"), c);
    let o = |kv: &[&str]| BrokerConfig::parse_overrides(kv.iter().copied()).expect("pairs");
    let refused = |kv: &[&str]| BrokerConfig::load(None, &o(kv)).unwrap_err().to_string();
    assert!(refused(&["tls.server.mode=enforcing"]).contains("tls.server.certPath"));
    assert!(refused(&["tls.enable=true"]).contains("tls.client.trustCertPath"));
    assert!(refused(&["adminHttpsEnable=true"]).contains("adminHttpsCertPath"));
    assert!(BrokerConfig::load(None, &o(&["tls.enable=true", "tls.client.authServer=false"])).is_ok());
}

#[test]
fn unknown_key_is_named() {
    let err = BrokerConfig::from_toml_str("brokerNmae = \"x\"").unwrap_err();
    assert!(matches!(err, ConfigError::Parse { .. }));
    assert!(err.to_string().contains("brokerNmae") || format!("{err:?}").contains("brokerNmae"), "{err}");
    let err = BrokerConfig::load(None, &[("listenPrt".to_owned(), "1".to_owned())]).unwrap_err();
    assert!(format!("{err:?}").contains("listenPrt"), "{err:?}");
}

/// Hole 6 of issue 31: acknowledging before fsync could be set from any production config as
/// `unsafeAckBeforeFsync`. That key is refused wherever a config is read (file, `-D`, update);
/// only the key whose name says it loses data turns it on.
#[test]
fn hole6_unsafe_ack_before_fsync_is_refused_unless_named_as_losing_data() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("broker.toml");
    std::fs::write(&file, format!("{LEGACY_UNSAFE_ACK_KEY} = true\n")).unwrap();
    let refused = [
        BrokerConfig::load(Some(&file), &[]).unwrap_err(),
        BrokerConfig::load(None, &[(LEGACY_UNSAFE_ACK_KEY.to_owned(), "true".to_owned())]).unwrap_err(),
        BrokerConfig::from_toml_str(&format!("{LEGACY_UNSAFE_ACK_KEY} = false")).unwrap_err(),
        BrokerConfig::default().with_overrides(&[(LEGACY_UNSAFE_ACK_KEY.to_owned(), "true".to_owned())]).unwrap_err(),
    ];
    for err in refused {
        assert!(matches!(&err, ConfigError::Invalid(why) if why.contains("loses")), "{err}");
    }
    assert!(!BrokerConfig::load(None, &[]).unwrap().raft_config().unsafe_ack_before_fsync);
    std::fs::write(&file, "testOnlyUnsafeAckBeforeFsyncLosesData = true\n").unwrap();
    let opted_in = BrokerConfig::load(Some(&file), &[]).expect("the data-losing opt-in loads");
    assert!(opted_in.raft_config().unsafe_ack_before_fsync);
}

#[test]
fn invalid_values_are_rejected() {
    let cases: &[(&str, &str)] = &[
        ("raftSelfId = 5", "raftSelfId 5"),
        ("brokerIP1 = \"10.0.0.7\"", "differs from the advertised"),
        ("brokerIP1 = \"not-an-ip\"", "brokerIP1"),
        ("brokerName = \"\"", "brokerName"),
        ("namesrvAddr = \"a:9876;b\"", "namesrvAddr"),
        ("mappedFileSizeCommitLog = 1024", "mappedFileSizeCommitLog"),
        ("mappedFileSizeConsumeQueue = 0", "mappedFileSizeConsumeQueue"),
        ("maxMessageSize = 0", "maxMessageSize"),
        ("maxMessageSize = 16000000\nmappedFileSizeCommitLog = 1073741824", "one Raft entry"),
        ("defaultTopicQueueNums = 0", "defaultTopicQueueNums"),
        ("brokerPermission = 16", "brokerPermission"),
        ("regionId = \"eu\\u0001x\"", "regionId"),
        ("regionId = \" \"", "regionId"),
        ("diskMaxUsedSpaceRatio = 99", "diskMaxUsedSpaceRatio"),
        ("diskSpaceCleanForciblyRatio = 70", "diskSpaceCleanForciblyRatio"),
        ("diskSpaceWarningLevelRatio = 100", "diskSpaceWarningLevelRatio"),
        ("diskSpaceWarningLevelRatio = 80", "diskSpaceWarningLevelRatio"),
        ("fileReservedTimeMs = 0", "fileReservedTimeMs"),
        ("cleanResourceInterval = 0", "cleanResourceInterval"),
        ("fileReservedTime = 0", "fileReservedTime"),
        ("deleteWhen = \"25\"", "deleteWhen"),
        ("messageDelayLevel = \"1s 5x\"", "messageDelayLevel"),
        ("registerNameServerPeriod = 0", "registerNameServerPeriod"),
        ("maxTransferCountOnMessageInDisk = 0", "maxTransferCountOnMessageInDisk"),
        ("maxTransferBytesOnMessageInMemory = 16777216", "a pull body must fit one remoting frame"),
        ("maxHashSlotNum = 0", "maxHashSlotNum"),
        ("maxIndexNum = 1", "maxIndexNum"),
        (
            "[[raftPeers]]\nid = 0\nremotingAddr = \"127.0.0.1:10911\"\nraftAddr = \"127.0.0.1:40911\"\n\
             [[raftPeers]]\nid = 0\nremotingAddr = \"127.0.0.2:10911\"\nraftAddr = \"127.0.0.2:40911\"",
            "appears twice",
        ),
        (
            "[[raftPeers]]\nid = 0\nremotingAddr = \"127.0.0.1:10911\"\nraftAddr = \"127.0.0.1:40911\"\n\
             [[raftPeers]]\nid = 1\nremotingAddr = \"127.0.0.2:10911\"\nraftAddr = \"127.0.0.1:40911\"",
            "used twice",
        ),
        ("raftPeers = []", "raftPeers is empty"),
    ];
    for (toml, needle) in cases {
        match BrokerConfig::from_toml_str(toml) {
            Err(ConfigError::Invalid(msg)) => assert!(msg.contains(needle), "{toml}: {msg}"),
            other => panic!("{toml}: expected Invalid containing {needle:?}, got {other:?}"),
        }
    }
    assert!(matches!(BrokerConfig::parse_overrides(["novalue"]), Err(ConfigError::Override(_))));
    assert!(matches!(
        BrokerConfig::load(Some(Path::new("/nonexistent/broker.toml")), &[]),
        Err(ConfigError::Read { .. })
    ));
}

#[test]
fn runtime_updates_apply_whole_or_not_at_all() {
    let boot = BrokerConfig::default();
    let known = boot.to_properties().unwrap();
    for key in RUNTIME_UPDATABLE_KEYS {
        assert!(known.contains_key(*key), "{key} is not a config key");
    }
    let updates = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    };
    let c = boot
        .with_updates(&updates(&[
            ("brokerPermission", "4"),
            ("shortPollingTimeMills", "500"),
            ("deleteWhen", "3"),
            ("autoCreateTopicEnable", "false"),
        ]))
        .unwrap();
    assert_eq!(c.broker_permission, 4);
    assert_eq!(c.short_polling_time_mills, Duration::from_millis(500));
    assert_eq!(c.delete_when, "3");
    assert!(!c.auto_create_topic_enable);
    assert_eq!(
        BrokerConfig { broker_permission: 6, ..c.clone() }.with_updates(&updates(&[])).unwrap().listen_port,
        10911
    );

    // A key sized at boot is refused by name, even next to a good one; nothing applies.
    match boot.with_updates(&updates(&[("brokerPermission", "4"), ("listenPort", "10912")])) {
        Err(e @ ConfigError::NotRuntimeUpdatable(_)) => {
            let msg = e.to_string();
            assert!(msg.starts_with("listenPort cannot be changed while the broker runs"), "{msg}");
            assert!(msg.contains("brokerPermission"), "{msg}");
        }
        other => panic!("expected NotRuntimeUpdatable, got {other:?}"),
    }
    assert!(matches!(
        boot.with_updates(&updates(&[("noSuchKey", "1")])),
        Err(ConfigError::NotRuntimeUpdatable(k)) if k == "noSuchKey"
    ));
    // Values are checked as at boot: type, range, and consistency with the other keys.
    assert!(matches!(boot.with_updates(&updates(&[("brokerPermission", "rw")])), Err(ConfigError::Parse { .. })));
    assert!(matches!(boot.with_updates(&updates(&[("brokerPermission", "16")])), Err(ConfigError::Invalid(_))));
    assert!(matches!(boot.with_updates(&updates(&[("diskMaxUsedSpaceRatio", "88")])), Err(ConfigError::Invalid(_))));
    assert!(matches!(boot.with_updates(&updates(&[("deleteWhen", "25")])), Err(ConfigError::Invalid(_))));
}

#[test]
fn consume_queue_size_rounds_up_like_rocketmq() {
    let c = BrokerConfig::from_toml_str("mappedFileSizeConsumeQueue = 101").unwrap();
    assert_eq!(c.consume_queue_units_per_file(), 6);
}

#[test]
fn durations_and_delay_levels() {
    assert_eq!(raftmq_common::config_duration::parse("500ms"), Some(Duration::from_millis(500)));
    assert_eq!(raftmq_common::config_duration::parse("42"), Some(Duration::from_millis(42)));
    assert_eq!(raftmq_common::config_duration::parse("s"), None);
    assert_eq!(parse_delay_level("2h"), Some(7_200_000));
    assert_eq!(parse_delay_level("1d"), Some(86_400_000));
    assert_eq!(parse_delay_level("0s"), None);
    assert_eq!(parse_delay_level(""), None);
    assert_eq!(parse_delay_level("h"), None);
}

#[test]
fn a_group_beyond_loopback_needs_a_cluster_secret_and_masks_it() {
    let peers = |host: &str| {
        vec![RaftPeer { id: 0, remoting_addr: format!("{host}:10911"), raft_addr: format!("{host}:40911") }]
    };
    let local = BrokerConfig::default();
    local.validate().expect("loopback needs no secret");
    let open = BrokerConfig { broker_ip1: Some("10.0.0.1".into()), raft_peers: peers("10.0.0.1"), ..local.clone() };
    let e = open.validate().expect_err("refused").to_string();
    assert!(e.contains("raftAddr 10.0.0.1:40911") && e.contains("clusterSecretFile"), "{e}");
    let remote_namesrv = BrokerConfig { namesrv_addr: "10.0.0.9:9876".into(), ..local.clone() };
    assert!(remote_namesrv.validate().expect_err("refused").to_string().contains("namesrvAddr 10.0.0.9:9876"));
    BrokerConfig { insecure_cluster_without_secret: true, ..open.clone() }.validate().expect("opt-out");
    let file = BrokerConfig { cluster_secret_file: Some("/etc/raftmq/cluster.secret".into()), ..open.clone() };
    file.validate().expect("a secret file (read at start)");
    let short = BrokerConfig { cluster_secret: Some("short".into()), ..open.clone() };
    assert!(short.validate().is_err(), "too short");
    let both = BrokerConfig { cluster_secret: Some("0123456789abcdef0123".into()), ..file.clone() };
    assert!(both.validate().is_err(), "not both");
    let inline = BrokerConfig { cluster_secret: Some("0123456789abcdef0123".into()), ..open };
    inline.validate().expect("an inline secret");
    let shown = inline.to_properties().expect("properties");
    assert_eq!(shown.get("clusterSecret").map(String::as_str), Some(SECRET_MASK));
    assert!(inline.load_cluster_secret().expect("inline").is_some());
}
