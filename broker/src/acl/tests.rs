//! The ACL's behaviour as a whole: Java's sample file, the check order, per-code resources, edits,
//! the file's reload and replicated installs (shared fixture: RocketMQ's sample `plain_acl.yml`).

use std::net::IpAddr;

use raftmq_common::limits::ACL_FILE_DEPTH_MAX_COUNT;
use raftmq_common::message::validate::RMQ_SYS_TRACE_TOPIC as TRACE_TOPIC;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::acl::ACCESS_KEY;
use raftmq_common::protocol::acl::SIGNATURE;
use raftmq_common::protocol::acl::SessionCredentials;
use raftmq_common::protocol::acl::UNIQUE_MSG_QUERY_FLAG;
use raftmq_common::protocol::acl::signature;
use raftmq_common::protocol::acl::signed_content;
use raftmq_common::protocol::body::JsonBody;
use raftmq_common::protocol::body::heartbeat::HeartbeatData;
use raftmq_common::protocol::command::FieldStr;

use super::edit::check_resource_perms;
use super::*;

const YAML: &str = r#"
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.{1,2}
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      - groupA=DENY
      - groupB=PUB|SUB
  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    admin: true
"#;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn config() -> AclConfig {
    AclConfig::parse_yaml(YAML).unwrap()
}

fn send(topic: &str) -> RemotingCommand {
    let mut r = RemotingCommand::request(RequestCode::SendMessageV2);
    r.ext_fields.insert(FieldStr::from("a"), FieldStr::from("PG"));
    r.ext_fields.insert(FieldStr::from("b"), FieldStr::from(topic));
    r.body = bytes::Bytes::from_static(b"hello");
    r
}

fn pull(topic: &str, group: &str) -> RemotingCommand {
    let mut r = RemotingCommand::request(RequestCode::PullMessage);
    r.ext_fields.insert(FieldStr::from("topic"), FieldStr::from(topic));
    r.ext_fields.insert(FieldStr::from("consumerGroup"), FieldStr::from(group));
    r
}

fn signed(mut r: RemotingCommand, ak: &str, sk: &str) -> RemotingCommand {
    SessionCredentials::new(ak, sk).unwrap().sign(&mut r);
    r
}

const OUTSIDE: &str = "172.16.0.9";

#[test]
fn parses_rocketmqs_sample_file() {
    // Keys keep their text as written: a leading zero is not a number's.
    let zero = "accounts:\n  - accessKey: zerokey\n    secretKey: 0123456789\n    topicPerms: []\n    admin: true\n";
    let z = AclConfig::parse_yaml(zero).unwrap();
    assert_eq!(z.accounts["zerokey"].secret_key, "0123456789");
    assert_eq!(z.accounts["zerokey"].perms, None, "an empty list is Java's null map");
    let c = config();
    assert_eq!(c.global_white.len(), 2);
    let a = &c.accounts["RocketMQ"];
    assert_eq!(a.secret_key, "12345678", "an integer secret is read as text");
    assert_eq!((a.admin, a.default_topic_perm, a.default_group_perm), (false, perm::DENY, perm::SUB));
    let perms = a.perms.as_ref().unwrap();
    assert_eq!(perms[&Resource::Topic("topicB".into())], perm::PUB | perm::SUB);
    assert_eq!(perms[&Resource::Group("groupA".into())], perm::DENY);
    assert_eq!(a.white_remote_address, None);
    let admin = &c.accounts["rocketmq2"];
    assert!(admin.admin && admin.perms.is_none());
    assert!(!format!("{a:?}").contains("12345678"), "the secret never reaches a log");
}

#[test]
fn refuses_bad_files_with_the_reason() {
    let bad = [
        ("accounts: 3", "accounts must be a list"),
        ("accounts:\n  - accessKey: sixsix\n    secretKey: 12345678\n", "accessKey 'sixsix' must be longer than 6"),
        ("accounts:\n  - accessKey: longenough\n    secretKey: 123456\n", "secretKey of longenough"),
        (
            "accounts:\n  - accessKey: longenough\n    secretKey: 12345678\n    groupPerms:\n      - g=SUB=PUB\n",
            "name=PERM",
        ),
        ("accounts:\n  - accessKey: longenough\n    secretKey: 12345678\n    topicPerms:\n      - nope\n", "name=PERM"),
        ("globalWhiteRemoteAddresses:\n  - 1.2.300.4\n", "not an address pattern"),
        (
            "accounts:\n  - accessKey: longenough\n    secretKey: 12345678\n  - accessKey: longenough\n    secretKey: 87654321\n",
            "twice",
        ),
        ("accounts: [", ""),
        // An alias would let a few lines expand into a huge tree.
        ("a: &x [1, 2]\nb: *x\n", "aliases are not accepted"),
        ("accounts:\n  - accessKey: longenough\n    secretKey: 12345678\n    admin: maybe\n", "admin must be"),
        ("--- {}\n--- {}\n", "one YAML document"),
    ];
    for (text, why) in bad {
        let e = AclConfig::parse_yaml(text).unwrap_err();
        assert!(e.0.contains(why), "{text:?}: {e}");
    }
    assert_eq!(AclConfig::parse_yaml("").unwrap(), AclConfig::default());
    let deep = format!("{}x", "- ".repeat(ACL_FILE_DEPTH_MAX_COUNT + 1));
    assert!(AclConfig::parse_yaml(&deep).unwrap_err().0.contains("nested deeper"), "deep nesting is refused");
    let deep_flow = format!("{}{}", "[".repeat(200), "]".repeat(200));
    assert!(AclConfig::parse_yaml(&deep_flow).is_err());
}

#[test]
fn the_checks_run_in_javas_order() {
    let c = config();
    let outside = ip(OUTSIDE);
    // 1. global white list: no credentials at all.
    assert_eq!(c.check(&send("topicA"), ip("10.10.103.5")), Ok(()));
    // 2. no access key; 3. unknown access key.
    assert_eq!(c.check(&send("topicB"), outside).unwrap_err().0, "No accessKey is configured");
    let unknown = signed(send("topicB"), "Nobody1", "12345678");
    assert_eq!(c.check(&unknown, outside).unwrap_err().0, "No acl config for Nobody1");
    // 4. the account's white address: no signature needed.
    let mut unsigned = send("anything");
    unsigned.ext_fields.insert(FieldStr::from(ACCESS_KEY), FieldStr::from("rocketmq2"));
    assert_eq!(c.check(&unsigned, ip("192.168.1.3")), Ok(()));
    // 5. signatures: a wrong secret, and a request changed after signing.
    let wrong = signed(send("topicB"), "RocketMQ", "87654321");
    assert_eq!(c.check(&wrong, outside).unwrap_err().0, "Check signature failed for accessKey=RocketMQ");
    let mut tampered = signed(send("topicB"), "RocketMQ", "12345678");
    tampered.body = bytes::Bytes::from_static(b"HELLO");
    assert_eq!(c.check(&tampered, outside).unwrap_err().0, "Check signature failed for accessKey=RocketMQ");
    let mut blank = signed(send("topicB"), "RocketMQ", "12345678");
    blank.ext_fields.insert(FieldStr::from(SIGNATURE), FieldStr::from(""));
    assert!(c.check(&blank, outside).is_err(), "an empty signature never matches");
    // 6. admin codes.
    let create = signed(RemotingCommand::request(RequestCode::UpdateAndCreateTopic), "RocketMQ", "12345678");
    assert_eq!(
        c.check(&create, outside).unwrap_err().0,
        "Need admin permission for request code=17, but accessKey=RocketMQ is not"
    );
    let create = signed(RemotingCommand::request(RequestCode::UpdateAndCreateTopic), "rocketmq2", "12345678");
    assert_eq!(c.check(&create, outside), Ok(()));
}

#[test]
fn resources_need_their_perms_with_defaults_behind() {
    let c = config();
    let outside = ip(OUTSIDE);
    let check = |r: RemotingCommand| c.check(&signed(r, "RocketMQ", "12345678"), outside).map_err(|e| e.0);
    assert_eq!(check(send("topicB")), Ok(()));
    assert_eq!(check(send("topicA")), Err("No default permission for topic:topicA".into()), "listed DENY");
    assert_eq!(check(send("topicC")), Err("No default permission for topic:topicC".into()), "SUB only");
    assert_eq!(check(send("other")), Err("No default permission for topic:other".into()));
    assert_eq!(check(pull("topicC", "groupB")), Ok(()));
    assert_eq!(check(pull("topicC", "groupA")), Err("No default permission for group:groupA".into()));
    assert_eq!(check(pull("topicC", "anyGroup")), Ok(()), "defaultGroupPerm SUB");
    // A group's retry topic is the group.
    assert_eq!(check(pull("%RETRY%groupA", "groupB")), Err("No default permission for group:groupA".into()));
    // A send to a retry topic needs SUB on the sending group (a), not PUB (4.9.4+).
    let mut resend = send("%RETRY%groupB");
    resend.ext_fields.insert(FieldStr::from("a"), FieldStr::from("groupA"));
    assert_eq!(
        resources(&resend).unwrap(),
        vec![(Resource::Group("groupA".into()), perm::SUB), (Resource::Group("groupB".into()), perm::SUB)]
    );
    assert_eq!(check(resend), Err("No default permission for group:groupA".into()));
    // Message traces pass whatever the topic perms say.
    assert_eq!(check(send(TRACE_TOPIC)), Ok(()));
    // Codes without resources need only a valid signature.
    assert_eq!(check(RemotingCommand::request(RequestCode::GetBrokerRuntimeInfo)), Ok(()));
}

#[test]
fn a_keyed_query_verifies_signed_with_or_without_the_unique_flag() {
    let c = config();
    let mut query = RemotingCommand::request(RequestCode::QueryMessage);
    query.ext_fields.insert(FieldStr::from("topic"), FieldStr::from("topicC"));
    query.ext_fields.insert(FieldStr::from("key"), FieldStr::from("k1"));
    query.ext_fields.insert(FieldStr::from(UNIQUE_MSG_QUERY_FLAG), FieldStr::from("true"));
    // What every client sends: the flag signed.
    let by_client = signed(query.clone(), "RocketMQ", "12345678");
    assert_eq!(c.check(&by_client, ip(OUTSIDE)), Ok(()));
    // What Java's broker expects: the flag left out.
    let mut by_java_rule = query.clone();
    by_java_rule.ext_fields.insert(FieldStr::from(ACCESS_KEY), FieldStr::from("RocketMQ"));
    let content = signed_content(&by_java_rule.ext_fields, &by_java_rule.body, false);
    by_java_rule.ext_fields.insert(FieldStr::from(SIGNATURE), FieldStr::from(signature(&content, "12345678")));
    assert_eq!(c.check(&by_java_rule, ip(OUTSIDE)), Ok(()));
    // Leaving the flag out is allowed only for the flag: a changed key still fails.
    let mut changed = by_client;
    changed.ext_fields.insert(FieldStr::from("key"), FieldStr::from("k2"));
    assert!(c.check(&changed, ip(OUTSIDE)).is_err());
}

#[test]
fn queue_locks_and_offset_queries_name_their_group() {
    let lock = RemotingCommand::request(RequestCode::LockBatchMq)
        .with_body(bytes::Bytes::from_static(br#"{"clientId":"c","consumerGroup":"groupA","mqSet":[]}"#));
    assert_eq!(resources(&lock).unwrap(), vec![(Resource::Group("groupA".into()), perm::SUB)]);
    let unlock = RemotingCommand::request(RequestCode::UnlockBatchMq).with_body(bytes::Bytes::from_static(b"{}"));
    assert_eq!(
        resources(&unlock).unwrap(),
        vec![(Resource::Group(String::new()), perm::SUB)],
        "no group is group \"\""
    );
    let garbage = RemotingCommand::request(RequestCode::LockBatchMq).with_body(bytes::Bytes::from_static(b"["));
    assert!(resources(&garbage).unwrap_err().0.contains("lock body"));
    let mut query = RemotingCommand::request(RequestCode::QueryConsumerOffset);
    query.ext_fields.insert(FieldStr::from("consumerGroup"), FieldStr::from("groupB"));
    query.ext_fields.insert(FieldStr::from("topic"), FieldStr::from("topicC"));
    assert_eq!(
        resources(&query).unwrap(),
        vec![(Resource::Group("groupB".into()), perm::SUB), (Resource::Topic("topicC".into()), perm::SUB)]
    );
    let mut back = RemotingCommand::request(RequestCode::ConsumerSendMsgBack);
    back.ext_fields.insert(FieldStr::from("group"), FieldStr::from("groupB"));
    back.ext_fields.insert(FieldStr::from("originTopic"), FieldStr::from("topicA"));
    let c = config();
    let back = signed(back, "RocketMQ", "12345678");
    assert_eq!(c.check(&back, ip(OUTSIDE)).unwrap_err().0, "No default permission for topic:topicA");
}

#[test]
fn heartbeats_name_their_groups_and_subscriptions() {
    use raftmq_common::protocol::body::heartbeat::ConsumerData;
    use raftmq_common::protocol::body::heartbeat::SubscriptionData;
    let data = HeartbeatData {
        client_id: "c".into(),
        consumer_data_set: vec![ConsumerData {
            group_name: "groupB".into(),
            subscription_data_set: vec![SubscriptionData { topic: "topicC".into(), ..Default::default() }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let request = RemotingCommand::request(RequestCode::HeartBeat).with_body(data.encode().unwrap());
    assert_eq!(
        resources(&request).unwrap(),
        vec![(Resource::Group("groupB".into()), perm::SUB), (Resource::Topic("topicC".into()), perm::SUB)]
    );
    let garbage = RemotingCommand::request(RequestCode::HeartBeat).with_body(bytes::Bytes::from_static(b"{"));
    assert!(resources(&garbage).unwrap_err().0.contains("heartbeat body"));
}

#[test]
fn an_admin_without_perms_may_touch_everything_and_with_perms_only_those() {
    let c = config();
    let ok = signed(send("whatever"), "rocketmq2", "12345678");
    assert_eq!(c.check(&ok, ip(OUTSIDE)), Ok(()));
    let text = format!("{YAML}    topicPerms:\n      - only=PUB\n");
    let c = AclConfig::parse_yaml(&text).unwrap();
    let denied = signed(send("whatever"), "rocketmq2", "12345678");
    assert_eq!(c.check(&denied, ip(OUTSIDE)).unwrap_err().0, "No default permission for topic:whatever");
}

#[test]
fn a_file_is_reloaded_when_it_changes_and_a_bad_edit_keeps_the_old_config() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plain_acl.yml");
    std::fs::write(&path, YAML).unwrap();
    let acl = Acl::load(&path).unwrap();
    assert!(!acl.reload_if_changed(), "unchanged");
    let added = format!("{YAML}  - accessKey: newcomer\n    secretKey: abcdefgh\n    admin: true\n");
    std::fs::write(&path, &added).unwrap();
    assert!(acl.reload_if_changed());
    assert!(acl.current().accounts.contains_key("newcomer"));
    std::fs::write(&path, "accounts: [").unwrap();
    assert!(!acl.reload_if_changed());
    assert!(acl.current().accounts.contains_key("newcomer"), "the previous config stays in force");
    std::fs::write(&path, "").unwrap();
    assert!(!acl.reload_if_changed(), "an empty file is a rewrite in progress, not a config");
    std::fs::write(&path, "\n# only a comment\n").unwrap();
    assert!(!acl.reload_if_changed(), "so is a blank one");
    assert!(acl.current().accounts.contains_key("newcomer"));
    std::fs::remove_file(&path).unwrap();
    assert!(!acl.reload_if_changed());
    assert!(!acl.reload_if_changed(), "a missing file is looked at, not re-read, on the next poll");
    assert!(acl.current().accounts.contains_key("newcomer"));
    std::fs::write(&path, YAML).unwrap();
    assert!(acl.reload_if_changed());
    assert!(!acl.current().accounts.contains_key("newcomer"));
    assert!(Acl::load(&dir.path().join("missing.yml")).is_err());
}

#[test]
fn acl_edits_need_a_signed_admin_whatever_the_address() {
    let c = config();
    let edit_request = |ak: &str| {
        let mut r = RemotingCommand::request(RequestCode::UpdateAndCreateAclConfig);
        r.ext_fields.insert(FieldStr::from("accessKey"), FieldStr::from("intruder1"));
        r.ext_fields.insert(FieldStr::from("admin"), FieldStr::from("true"));
        r.ext_fields.insert(FieldStr::from(ACCESS_KEY), FieldStr::from(ak));
        r
    };
    // A globally white-listed host passes other codes unchecked, but not an ACL edit.
    assert!(c.check(&send("topicA"), ip("10.10.103.7")).is_ok());
    let e = c.check(&edit_request("RocketMQ"), ip("10.10.103.7")).unwrap_err().0;
    assert!(e.starts_with("Check signature failed"), "{e}");
    // An admin account's white address admits it without a signature elsewhere, not here.
    let e = c.check(&edit_request("rocketmq2"), ip("192.168.1.5")).unwrap_err().0;
    assert!(e.starts_with("Check signature failed"), "{e}");
    let mut signed_admin = edit_request("rocketmq2");
    signed_admin.ext_fields.shift_remove(ACCESS_KEY);
    assert!(c.check(&signed(signed_admin, "rocketmq2", "12345678"), ip(OUTSIDE)).is_ok());
    // A signed account that is not an admin may not edit.
    let mut plain = edit_request("RocketMQ");
    plain.ext_fields.shift_remove(ACCESS_KEY);
    let e = c.check(&signed(plain, "RocketMQ", "12345678"), ip(OUTSIDE)).unwrap_err().0;
    assert!(e.starts_with("Need admin permission"), "{e}");
    // Reading every secret is as guarded as an edit: no address shortcut, admin only.
    let mut read = RemotingCommand::request(RequestCode::GetBrokerClusterAclConfig);
    read.ext_fields.insert(FieldStr::from(ACCESS_KEY), FieldStr::from("RocketMQ"));
    let e = c.check(&read, ip("10.10.103.7")).unwrap_err().0;
    assert!(e.starts_with("Check signature failed"), "{e}");
    let read = RemotingCommand::request(RequestCode::GetBrokerClusterAclConfig);
    let e = c.check(&signed(read.clone(), "RocketMQ", "12345678"), ip(OUTSIDE)).unwrap_err().0;
    assert!(e.starts_with("Need admin permission"), "{e}");
    assert!(c.check(&signed(read, "rocketmq2", "12345678"), ip(OUTSIDE)).is_ok());
    // Perm items split as Java's StringUtils.split does.
    assert!(check_resource_perms(&["t==PUB".into()]).is_ok());
    assert!(check_resource_perms(&["=PUB".into()]).is_err());
    assert!(
        AclConfig::default()
            .source
            .upsert(&AccountEdit { secret_key: Some("line\nbreak".into()), ..edit("newcomer") })
            .is_err()
    );
    assert!(AclSource::default().with_global_white(vec!["10.0.0.1\t".into()]).is_err());
}

fn edit(ak: &str) -> AccountEdit {
    AccountEdit { access_key: ak.into(), secret_key: Some("secret-key-1".into()), ..AccountEdit::default() }
}

#[test]
fn edits_follow_javas_merge_rules() {
    let base = AclConfig::parse_yaml(YAML).unwrap().source;
    // A new account goes last, with only what the edit names.
    let added = base
        .upsert(&AccountEdit { admin: true, topic_perms: Some(vec!["t1=PUB".into()]), ..edit("newcomer") })
        .unwrap();
    let last = added.accounts.last().unwrap();
    assert_eq!((last.access_key.as_str(), last.admin), ("newcomer", true));
    assert_eq!(last.topic_perms, Some(vec!["t1=PUB".to_owned()]));
    assert_eq!((last.group_perms.as_ref(), last.default_topic_perm.as_ref()), (None, None));
    // An existing one keeps the fields the edit leaves out, moves to the end, and `admin` is
    // always replaced (Java's primitive field).
    let first = base.accounts[0].clone();
    let updated =
        base.upsert(&AccountEdit { default_group_perm: Some("PUB".into()), ..edit(&first.access_key) }).unwrap();
    assert_eq!(updated.accounts.len(), base.accounts.len());
    let moved = updated.accounts.last().unwrap();
    assert_eq!(moved.access_key, first.access_key);
    assert_eq!(moved.default_group_perm.as_deref(), Some("PUB"));
    assert_eq!(moved.default_topic_perm, first.default_topic_perm);
    assert_eq!(moved.topic_perms, first.topic_perms);
    assert!(!moved.admin);
    // Perm lists are replaced whole; an empty default perm leaves the old one.
    let replaced = base
        .upsert(&AccountEdit {
            topic_perms: Some(vec!["only=SUB".into()]),
            default_topic_perm: Some(String::new()),
            ..edit(&first.access_key)
        })
        .unwrap();
    let moved = replaced.accounts.last().unwrap();
    assert_eq!(moved.topic_perms, Some(vec!["only=SUB".to_owned()]));
    assert_eq!(moved.default_topic_perm, first.default_topic_perm);
    // Refusals: short keys (the secret is required on an update too, and never echoed), a bad
    // resource item, a bad address.
    let refused = |e: AccountEdit| base.upsert(&e).unwrap_err().0;
    assert!(refused(AccountEdit { secret_key: None, ..edit("newcomer") }).contains("longer than 6"));
    assert!(refused(edit("short")).contains("longer than 6"));
    let r = refused(AccountEdit { secret_key: Some("123456".into()), ..edit("newcomer") });
    assert!(!r.contains("123456"), "{r}");
    assert!(
        refused(AccountEdit { topic_perms: Some(vec!["t=PUBLISH".into()]), ..edit("newcomer") }).contains("t=PUBLISH")
    );
    assert!(refused(AccountEdit { group_perms: Some(vec!["g".into()]), ..edit("newcomer") }).contains("g"));
    assert!(
        refused(AccountEdit { white_remote_address: Some("300.1.1.1".into()), ..edit("newcomer") })
            .contains("whiteRemoteAddress")
    );
    // Delete and the global white list.
    assert_eq!(base.delete("nobody-here"), None);
    let deleted = base.delete(&first.access_key).unwrap();
    assert!(deleted.accounts.iter().all(|a| a.access_key != first.access_key));
    let white = base.with_global_white(vec!["10.0.0.*".into()]).unwrap();
    assert_eq!(white.global_white, vec!["10.0.0.*".to_owned()]);
    assert!(base.with_global_white(vec!["10.0.0.999".into()]).is_err());
}

#[test]
fn a_written_file_reads_back_as_the_same_config_with_its_version() {
    let mut source = AclConfig::parse_yaml(YAML).unwrap().source;
    source = source
        .upsert(&AccountEdit {
            secret_key: Some("it's-0123".into()),
            white_remote_address: Some("192.168.1.*".into()),
            admin: true,
            default_topic_perm: Some("PUB|SUB".into()),
            group_perms: Some(Vec::new()),
            ..edit("0012345")
        })
        .unwrap();
    source.version = Some(AclVersion { counter: 7, timestamp: 1_700_000_000_123 });
    let yaml = source.to_yaml();
    let back = AclConfig::parse_yaml(&yaml).unwrap();
    assert_eq!(back.source, source, "{yaml}");
    let original = AclConfig::parse_yaml(YAML).unwrap();
    for (key, account) in &original.accounts {
        assert_eq!(back.accounts.get(key), Some(account), "{key} unchanged");
    }
    let ak = back.accounts.get("0012345").expect("a numeric-looking key stays text");
    assert!(ak.admin);
    assert_eq!(ak.default_topic_perm, perm::PUB | perm::SUB);
    assert!(yaml.contains("dataVersion:\n  - counter: 7\n    timestamp: 1700000000123\n"), "{yaml}");
    // Java's own layout of the version reads too.
    let java = "accounts: []\ndataVersion:\n- counter: 2\n  timestamp: 1700000000000\n";
    let v = AclConfig::parse_yaml(java).unwrap().source.version;
    assert_eq!(v, Some(AclVersion { counter: 2, timestamp: 1_700_000_000_000 }));
    assert_eq!(v.unwrap().to_json(), r#"{"counter":2,"timestamp":1700000000000}"#);
    // An empty config writes lists Java reads as empty.
    assert_eq!(AclSource::default().to_yaml(), "globalWhiteRemoteAddresses: []\naccounts: []\n");
    assert_eq!(AclConfig::parse_yaml(&AclSource::default().to_yaml()).unwrap(), AclConfig::default());
}

#[test]
fn a_replicated_edit_is_installed_once_and_never_undoes_a_later_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config").join("plain_acl.yml");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, YAML).unwrap();
    let acl = Acl::load(&path).unwrap();
    let doc = |counter: i64, ak: &str| {
        let mut s = acl.current().source.upsert(&edit(ak)).unwrap();
        s.version = Some(AclVersion { counter, timestamp: counter * 10 });
        AclDocument { version: s.version.unwrap(), yaml: s.to_yaml() }
    };
    let second = doc(2, "second-account");
    let first = doc(1, "first-account");
    assert!(acl.install(&second).unwrap());
    assert!(acl.current().accounts.contains_key("second-account"));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), second.yaml);
    assert!(!acl.reload_if_changed(), "our own write is not a change to reload");
    assert!(!acl.install(&first).unwrap(), "an older edit (a restart re-applying) is skipped");
    assert!(!acl.install(&second).unwrap(), "so is the same one");
    assert!(!acl.current().accounts.contains_key("first-account"));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), second.yaml);
    let names: Vec<_> = std::fs::read_dir(path.parent().unwrap()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, vec![std::ffi::OsString::from("plain_acl.yml")], "no temporary file is left");
    let bad = AclDocument { version: AclVersion { counter: 3, timestamp: 0 }, yaml: "accounts: [".into() };
    assert!(acl.install(&bad).is_err());
    assert!(acl.current().accounts.contains_key("second-account"), "a bad document changes nothing");
}

#[test]
fn a_restart_keeps_a_hand_edit_of_the_last_replicated_file_and_its_permissions() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plain_acl.yml");
    std::fs::write(&path, YAML).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
    let acl = Acl::load(&path).unwrap();
    let mut source = acl.current().source.upsert(&edit("replicated")).unwrap();
    source.version = Some(AclVersion { counter: 4, timestamp: 40 });
    let doc = AclDocument { version: source.version.unwrap(), yaml: source.to_yaml() };
    assert!(acl.install(&doc).unwrap());
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o640, "secrets stay private");
    // By hand, keeping the dataVersion line; then a restart replays the same edit.
    let hand = std::fs::read_to_string(&path).unwrap().replace("'replicated'", "'hand-edited'");
    std::fs::write(&path, &hand).unwrap();
    let stale = dir.path().join(".plain_acl.yml.77.0.tmp");
    std::fs::write(&stale, "secrets left by a crash").unwrap();
    let restarted = Acl::load(&path).unwrap();
    assert!(!stale.exists(), "a crash's temporary file goes at load");
    assert!(!restarted.install(&doc).unwrap(), "the file holds that edit");
    assert!(restarted.current().accounts.contains_key("hand-edited"));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), hand);
    // A file from elsewhere, with a larger counter of its own, still takes the group's edit.
    let mut foreign = AclConfig::parse_yaml(YAML).unwrap().source;
    foreign.version = Some(AclVersion { counter: 45, timestamp: 1 });
    std::fs::write(&path, foreign.to_yaml()).unwrap();
    let migrated = Acl::load(&path).unwrap();
    assert!(migrated.install(&doc).unwrap());
    assert!(migrated.current().accounts.contains_key("replicated"));
}
