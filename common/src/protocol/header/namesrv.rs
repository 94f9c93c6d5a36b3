//! Headers of the NameServer requests: broker registration, route queries, topic deletion and the
//! KV-config codes, the write-permission switches of a group (`common/.../protocol/header/namesrv/*.java`,
//! 4.9.8), plus raftmq's Raft extension of REGISTER_BROKER.
//!
//! ## The Raft extension of REGISTER_BROKER
//!
//! A raftmq broker adds three `extFields` keys to the RocketMQ header. A Java NameServer ignores
//! them (unknown keys are dropped), so a raftmq broker can still register with one; a raftmq
//! NameServer uses them to pick the group's writable address:
//!
//! | Key | Value | Meaning |
//! |---|---|---|
//! | `raftTerm` | decimal `u64` | the node's current Raft term |
//! | `raftRole` | `LEADER`, `FOLLOWER`, `CANDIDATE` or `LEARNER` | the node's role in that term |
//! | `raftNodeId` | decimal `u64`, at most `i64::MAX - 1` | the node's Raft id inside its group |
//!
//! The three travel together: all absent means a plain RocketMQ registration (Java master/slave
//! semantics by `brokerId`); some present and some absent is a [`HeaderError::Missing`].
//!
//! Invariant: every `read_ext_fields` returns an error instead of panicking on any map.

use super::CommandHeader;
use super::FieldValue;
use super::HeaderError;
use super::ext_header::ext_header;
use super::optional;
use super::put;
use super::put_opt;
use super::required;
use crate::protocol::ext_fields::ExtFields;

/// `extFields` key of the Raft term (raftmq extension).
pub const RAFT_TERM_KEY: &str = "raftTerm";
/// `extFields` key of the Raft role (raftmq extension).
pub const RAFT_ROLE_KEY: &str = "raftRole";
/// `extFields` key of the Raft node id (raftmq extension).
pub const RAFT_NODE_ID_KEY: &str = "raftNodeId";

/// Largest `raftNodeId` accepted: the route shows a follower as brokerId `raftNodeId + 1`, an `i64`.
pub const RAFT_NODE_ID_MAX: u64 = i64::MAX as u64 - 1;

/// A node's role in its Raft group, as reported in `raftRole`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RaftRole {
    /// Accepts writes for the group in its term.
    Leader,
    /// Replicates the leader's log.
    Follower,
    /// Campaigning in a new term; not writable.
    Candidate,
    /// Non-voting replica.
    Learner,
}

impl RaftRole {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            RaftRole::Leader => "LEADER",
            RaftRole::Follower => "FOLLOWER",
            RaftRole::Candidate => "CANDIDATE",
            RaftRole::Learner => "LEARNER",
        }
    }
}

impl FieldValue for RaftRole {
    const EXPECTED: &'static str = "LEADER, FOLLOWER, CANDIDATE or LEARNER";

    fn parse_field(raw: &str) -> Option<Self> {
        match raw {
            "LEADER" => Some(RaftRole::Leader),
            "FOLLOWER" => Some(RaftRole::Follower),
            "CANDIDATE" => Some(RaftRole::Candidate),
            "LEARNER" => Some(RaftRole::Learner),
            _ => None,
        }
    }

    fn format_field(&self) -> crate::protocol::ext_fields::FieldStr {
        crate::protocol::ext_fields::FieldStr::const_new(self.as_str())
    }
}

/// The Raft facts a raftmq broker adds to REGISTER_BROKER.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RaftRegistration {
    /// `raftTerm`.
    pub term: u64,
    /// `raftRole`.
    pub role: RaftRole,
    /// `raftNodeId` (at most [`RAFT_NODE_ID_MAX`]).
    pub node_id: u64,
}

impl RaftRegistration {
    fn read(fields: &ExtFields) -> Result<Option<Self>, HeaderError> {
        let term: Option<u64> = optional(fields, RAFT_TERM_KEY)?;
        let role: Option<RaftRole> = optional(fields, RAFT_ROLE_KEY)?;
        let node_id: Option<u64> = optional(fields, RAFT_NODE_ID_KEY)?;
        match (term, role, node_id) {
            (None, None, None) => Ok(None),
            (Some(term), Some(role), Some(node_id)) => {
                if node_id > RAFT_NODE_ID_MAX {
                    return Err(HeaderError::Invalid {
                        field: RAFT_NODE_ID_KEY,
                        value: node_id.to_string(),
                        expected: "u64 at most i64::MAX - 1",
                    });
                }
                Ok(Some(RaftRegistration { term, role, node_id }))
            }
            (None, _, _) => Err(HeaderError::Missing { field: RAFT_TERM_KEY }),
            (_, None, _) => Err(HeaderError::Missing { field: RAFT_ROLE_KEY }),
            (_, _, None) => Err(HeaderError::Missing { field: RAFT_NODE_ID_KEY }),
        }
    }

    fn write(&self, fields: &mut ExtFields) {
        put(fields, RAFT_TERM_KEY, &self.term);
        put(fields, RAFT_ROLE_KEY, &self.role);
        put(fields, RAFT_NODE_ID_KEY, &self.node_id);
    }
}

/// REGISTER_BROKER (103) request header (`RegisterBrokerRequestHeader`), with the Raft extension.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisterBrokerRequestHeader {
    /// `brokerName`: the broker group (= the Raft group).
    pub broker_name: String,
    /// `brokerAddr`: `ip:port` clients use.
    pub broker_addr: String,
    /// `clusterName`.
    pub cluster_name: String,
    /// `haServerAddr` (Java master/slave replication; raftmq brokers send their Raft address).
    pub ha_server_addr: String,
    /// `brokerId`: 0 = master in Java semantics; ignored for routing when `raft` is present.
    pub broker_id: i64,
    /// `heartbeatTimeoutMillis` (5.x): this broker's own expiry; absent = the NameServer's default.
    pub heartbeat_timeout_millis: Option<i64>,
    /// `compressed`: the body is the deflated form (docs/wire-format.md#broker-registration-body).
    pub compressed: bool,
    /// `bodyCrc32`: `CRC32(body) & 0x7FFFFFFF`; 0 = unchecked.
    pub body_crc32: i32,
    /// `raftTerm` + `raftRole` + `raftNodeId`; `None` for a plain RocketMQ broker.
    pub raft: Option<RaftRegistration>,
}

impl CommandHeader for RegisterBrokerRequestHeader {
    fn write_ext_fields(&self, fields: &mut ExtFields) {
        put(fields, "brokerName", &self.broker_name);
        put(fields, "brokerAddr", &self.broker_addr);
        put(fields, "clusterName", &self.cluster_name);
        put(fields, "haServerAddr", &self.ha_server_addr);
        put(fields, "brokerId", &self.broker_id);
        put_opt(fields, "heartbeatTimeoutMillis", &self.heartbeat_timeout_millis);
        put(fields, "compressed", &self.compressed);
        put(fields, "bodyCrc32", &self.body_crc32);
        if let Some(raft) = &self.raft {
            raft.write(fields);
        }
    }

    fn read_ext_fields(fields: &ExtFields) -> Result<Self, HeaderError> {
        Ok(RegisterBrokerRequestHeader {
            broker_name: required(fields, "brokerName")?,
            broker_addr: required(fields, "brokerAddr")?,
            cluster_name: required(fields, "clusterName")?,
            ha_server_addr: required(fields, "haServerAddr")?,
            broker_id: required(fields, "brokerId")?,
            heartbeat_timeout_millis: optional(fields, "heartbeatTimeoutMillis")?,
            compressed: optional(fields, "compressed")?.unwrap_or(false),
            body_crc32: optional(fields, "bodyCrc32")?.unwrap_or(0),
            raft: RaftRegistration::read(fields)?,
        })
    }
}

ext_header! {
    /// REGISTER_BROKER response header (`RegisterBrokerResponseHeader`).
    pub struct RegisterBrokerResponseHeader {
        /// `haServerAddr` of the group's master (the Raft leader), if known.
        optional ha_server_addr: Option<String> => "haServerAddr",
        /// `masterAddr`: the group's writable address, if known.
        optional master_addr: Option<String> => "masterAddr",
    }
}

ext_header! {
    /// UNREGISTER_BROKER (104) request header (`UnRegisterBrokerRequestHeader`).
    pub struct UnregisterBrokerRequestHeader {
        /// `brokerName`.
        required broker_name: String => "brokerName",
        /// `brokerAddr`.
        required broker_addr: String => "brokerAddr",
        /// `clusterName`.
        required cluster_name: String => "clusterName",
        /// `brokerId` (informational for raftmq: the address identifies the node).
        required broker_id: i64 => "brokerId",
    }
}

ext_header! {
    /// GET_ROUTEINFO_BY_TOPIC (105) request header (`GetRouteInfoRequestHeader`).
    pub struct GetRouteInfoRequestHeader {
        /// `topic`.
        required topic: String => "topic",
        /// `acceptStandardJsonOnly` (4.9.4+); raftmq always answers standard JSON, which fastjson parses.
        optional accept_standard_json_only: Option<bool> => "acceptStandardJsonOnly",
    }
}

ext_header! {
    /// DELETE_TOPIC_IN_NAMESRV (216) request header (`DeleteTopicFromNamesrvRequestHeader`).
    pub struct DeleteTopicFromNamesrvRequestHeader {
        /// `topic`.
        required topic: String => "topic",
        /// `clusterName` (5.x): delete only this cluster's queues of the topic; absent = everywhere.
        optional cluster_name: Option<String> => "clusterName",
    }
}

ext_header! {
    /// GET_TOPICS_BY_CLUSTER (224) request header (`GetTopicsByClusterRequestHeader`).
    pub struct GetTopicsByClusterRequestHeader {
        /// `cluster`.
        required cluster: String => "cluster",
    }
}

ext_header! {
    /// QUERY_DATA_VERSION (322) request (`QueryDataVersionRequestHeader`): has the NameServer this
    /// broker's topic table version? The body is the broker's `DataVersion`.
    pub struct QueryDataVersionRequestHeader {
        /// `brokerName`.
        required broker_name: String => "brokerName",
        /// `brokerAddr`.
        required broker_addr: String => "brokerAddr",
        /// `clusterName`.
        required cluster_name: String => "clusterName",
        /// `brokerId`.
        required broker_id: i64 => "brokerId",
    }
}

ext_header! {
    /// QUERY_DATA_VERSION (322) response (`QueryDataVersionResponseHeader`); the body is the version
    /// the NameServer holds, absent when it holds none.
    pub struct QueryDataVersionResponseHeader {
        /// Whether the broker's version differs from the NameServer's (so it should register).
        required changed: bool => "changed",
    }
}

ext_header! {
    /// PUT_KV_CONFIG (100) request header (`PutKVConfigRequestHeader`).
    pub struct PutKvConfigRequestHeader {
        /// `namespace`, e.g. `ORDER_TOPIC_CONFIG`.
        required namespace: String => "namespace",
        /// `key`.
        required key: String => "key",
        /// `value`.
        required value: String => "value",
    }
}

ext_header! {
    /// GET_KV_CONFIG (101) request header (`GetKVConfigRequestHeader`).
    pub struct GetKvConfigRequestHeader {
        /// `namespace`.
        required namespace: String => "namespace",
        /// `key`.
        required key: String => "key",
    }
}

ext_header! {
    /// GET_KV_CONFIG response header (`GetKVConfigResponseHeader`).
    pub struct GetKvConfigResponseHeader {
        /// `value`; absent when the key is unknown (the response code is then QUERY_NOT_FOUND).
        optional value: Option<String> => "value",
    }
}

ext_header! {
    /// DELETE_KV_CONFIG (102) request header (`DeleteKVConfigRequestHeader`).
    pub struct DeleteKvConfigRequestHeader {
        /// `namespace`.
        required namespace: String => "namespace",
        /// `key`.
        required key: String => "key",
    }
}

ext_header! {
    /// GET_KVLIST_BY_NAMESPACE (219) request header (`GetKVListByNamespaceRequestHeader`).
    pub struct GetKvListByNamespaceRequestHeader {
        /// `namespace`.
        required namespace: String => "namespace",
    }
}

ext_header! {
    /// WIPE_WRITE_PERM_OF_BROKER (205) request header (`WipeWritePermOfBrokerRequestHeader`).
    pub struct WipeWritePermOfBrokerRequestHeader {
        /// `brokerName`: the group whose queues stop taking writes.
        required broker_name: String => "brokerName",
    }
}

ext_header! {
    /// WIPE_WRITE_PERM_OF_BROKER response header (`WipeWritePermOfBrokerResponseHeader`).
    pub struct WipeWritePermOfBrokerResponseHeader {
        /// `wipeTopicCount`: topics of the group whose queue data was changed.
        required wipe_topic_count: i32 => "wipeTopicCount",
    }
}

ext_header! {
    /// ADD_WRITE_PERM_OF_BROKER (327) request header (`AddWritePermOfBrokerRequestHeader`).
    pub struct AddWritePermOfBrokerRequestHeader {
        /// `brokerName`: the group whose queues take writes again.
        required broker_name: String => "brokerName",
    }
}

ext_header! {
    /// ADD_WRITE_PERM_OF_BROKER response header (`AddWritePermOfBrokerResponseHeader`).
    pub struct AddWritePermOfBrokerResponseHeader {
        /// `addTopicCount`: topics of the group whose queue data was changed.
        required add_topic_count: i32 => "addTopicCount",
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::protocol::header::ext_header::testing::Spell as _;
    use crate::protocol::header::ext_header::testing::TestHeader;
    use crate::protocol::header::ext_header::testing::check_header;

    /// REGISTER_BROKER's header is written by hand (the Raft keys travel together), so its property
    /// checks get their strategy and spellings here.
    impl TestHeader for RegisterBrokerRequestHeader {
        const FIELDS: &'static [(&'static str, bool)] = &[
            ("brokerName", true),
            ("brokerAddr", true),
            ("clusterName", true),
            ("haServerAddr", true),
            ("brokerId", true),
            ("heartbeatTimeoutMillis", false),
            ("compressed", false),
            ("bodyCrc32", false),
            (RAFT_TERM_KEY, false),
            (RAFT_ROLE_KEY, false),
            (RAFT_NODE_ID_KEY, false),
        ];

        fn arbitrary() -> BoxedStrategy<Self> {
            let role = prop_oneof![
                Just(RaftRole::Leader),
                Just(RaftRole::Follower),
                Just(RaftRole::Candidate),
                Just(RaftRole::Learner)
            ];
            let raft = proptest::option::of(
                (any::<u64>(), role, 0..=RAFT_NODE_ID_MAX).prop_map(|(term, role, node_id)| RaftRegistration {
                    term,
                    role,
                    node_id,
                }),
            );
            let names = (any::<String>(), any::<String>(), any::<String>(), any::<String>());
            (names, any::<i64>(), any::<Option<i64>>(), any::<bool>(), any::<i32>(), raft)
                .prop_map(
                    |(
                        (broker_name, broker_addr, cluster_name, ha_server_addr),
                        broker_id,
                        heartbeat_timeout_millis,
                        compressed,
                        body_crc32,
                        raft,
                    )| RegisterBrokerRequestHeader {
                        broker_name,
                        broker_addr,
                        cluster_name,
                        ha_server_addr,
                        broker_id,
                        heartbeat_timeout_millis,
                        compressed,
                        body_crc32,
                        raft,
                    },
                )
                .boxed()
        }

        fn spelled(&self, choices: &[usize]) -> (ExtFields, Self) {
            let mut fields = ExtFields::default();
            let mut choice = choices.iter().copied().chain(std::iter::repeat(0));
            let mut next = || choice.next().unwrap_or(0);
            let expected = RegisterBrokerRequestHeader {
                broker_name: self.broker_name.spell(next(), "brokerName", &mut fields),
                broker_addr: self.broker_addr.spell(next(), "brokerAddr", &mut fields),
                cluster_name: self.cluster_name.spell(next(), "clusterName", &mut fields),
                ha_server_addr: self.ha_server_addr.spell(next(), "haServerAddr", &mut fields),
                broker_id: self.broker_id.spell(next(), "brokerId", &mut fields),
                heartbeat_timeout_millis: self.heartbeat_timeout_millis.spell(
                    next(),
                    "heartbeatTimeoutMillis",
                    &mut fields,
                ),
                compressed: self.compressed.spell(next(), "compressed", &mut fields),
                body_crc32: self.body_crc32.spell(next(), "bodyCrc32", &mut fields),
                raft: self.raft.map(|raft| {
                    // raftmq's own keys: the role by name only, as raftmq brokers write it.
                    put(&mut fields, RAFT_ROLE_KEY, &raft.role);
                    RaftRegistration {
                        term: raft.term.spell(next(), RAFT_TERM_KEY, &mut fields),
                        role: raft.role,
                        node_id: raft.node_id.spell(next(), RAFT_NODE_ID_KEY, &mut fields),
                    }
                }),
            };
            (fields, expected)
        }
    }

    #[test]
    fn every_namesrv_header_reads_as_java_reads_it() {
        check_header::<RegisterBrokerRequestHeader>();
        check_header::<RegisterBrokerResponseHeader>();
        check_header::<UnregisterBrokerRequestHeader>();
        check_header::<GetRouteInfoRequestHeader>();
        check_header::<DeleteTopicFromNamesrvRequestHeader>();
        check_header::<GetTopicsByClusterRequestHeader>();
        check_header::<QueryDataVersionRequestHeader>();
        check_header::<QueryDataVersionResponseHeader>();
        check_header::<PutKvConfigRequestHeader>();
        check_header::<GetKvConfigRequestHeader>();
        check_header::<GetKvConfigResponseHeader>();
        check_header::<DeleteKvConfigRequestHeader>();
        check_header::<GetKvListByNamespaceRequestHeader>();
        check_header::<WipeWritePermOfBrokerRequestHeader>();
        check_header::<WipeWritePermOfBrokerResponseHeader>();
        check_header::<AddWritePermOfBrokerRequestHeader>();
        check_header::<AddWritePermOfBrokerResponseHeader>();
    }

    fn fields(pairs: &[(&str, &str)]) -> ExtFields {
        pairs.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect()
    }

    fn register_header(raft: Option<RaftRegistration>) -> RegisterBrokerRequestHeader {
        RegisterBrokerRequestHeader {
            broker_name: "broker-a".into(),
            broker_addr: "127.0.0.1:10911".into(),
            cluster_name: "DefaultCluster".into(),
            ha_server_addr: "127.0.0.1:10912".into(),
            broker_id: 0,
            heartbeat_timeout_millis: None,
            compressed: false,
            body_crc32: 0,
            raft,
        }
    }

    #[test]
    fn register_round_trips_with_and_without_raft() {
        for raft in [None, Some(RaftRegistration { term: 7, role: RaftRole::Follower, node_id: 2 })] {
            let h = register_header(raft);
            assert_eq!(RegisterBrokerRequestHeader::read_ext_fields(&h.to_ext_fields()), Ok(h));
        }
    }

    #[test]
    fn register_reads_java_broker_fields() {
        // What a 4.9.8 Java broker sends: every field as a string, no Raft keys.
        let f = fields(&[
            ("brokerName", "broker-a"),
            ("brokerAddr", "10.0.0.1:10911"),
            ("clusterName", "DefaultCluster"),
            ("haServerAddr", "10.0.0.1:10912"),
            ("brokerId", "1"),
            ("compressed", "true"),
            ("bodyCrc32", "123456"),
        ]);
        let h = RegisterBrokerRequestHeader::read_ext_fields(&f).expect("java header");
        assert_eq!(h.broker_id, 1);
        assert!(h.compressed);
        assert_eq!(h.body_crc32, 123_456);
        assert_eq!(h.raft, None);
    }

    #[test]
    fn register_missing_required_field_is_named() {
        let mut f = register_header(None).to_ext_fields();
        f.shift_remove("brokerName");
        assert_eq!(RegisterBrokerRequestHeader::read_ext_fields(&f), Err(HeaderError::Missing { field: "brokerName" }));
    }

    #[test]
    fn register_partial_raft_fields_are_an_error() {
        let mut f = register_header(None).to_ext_fields();
        f.insert(RAFT_TERM_KEY.into(), "3".into());
        f.insert(RAFT_NODE_ID_KEY.into(), "1".into());
        assert_eq!(
            RegisterBrokerRequestHeader::read_ext_fields(&f),
            Err(HeaderError::Missing { field: RAFT_ROLE_KEY })
        );
    }

    #[test]
    fn register_rejects_bad_role_and_oversized_node_id() {
        let mut f =
            register_header(Some(RaftRegistration { term: 1, role: RaftRole::Leader, node_id: 0 })).to_ext_fields();
        f.insert(RAFT_ROLE_KEY.into(), "KING".into());
        assert!(matches!(
            RegisterBrokerRequestHeader::read_ext_fields(&f),
            Err(HeaderError::Invalid { field: RAFT_ROLE_KEY, .. })
        ));
        f.insert(RAFT_ROLE_KEY.into(), "LEADER".into());
        f.insert(RAFT_NODE_ID_KEY.into(), u64::MAX.to_string().into());
        assert!(matches!(
            RegisterBrokerRequestHeader::read_ext_fields(&f),
            Err(HeaderError::Invalid { field: RAFT_NODE_ID_KEY, .. })
        ));
    }

    #[test]
    fn small_headers_round_trip() {
        let h = GetRouteInfoRequestHeader { topic: "T".into(), accept_standard_json_only: Some(true) };
        assert_eq!(GetRouteInfoRequestHeader::read_ext_fields(&h.to_ext_fields()), Ok(h));
        let h = UnregisterBrokerRequestHeader {
            broker_name: "b".into(),
            broker_addr: "a:1".into(),
            cluster_name: "c".into(),
            broker_id: 2,
        };
        assert_eq!(UnregisterBrokerRequestHeader::read_ext_fields(&h.to_ext_fields()), Ok(h));
        let h = PutKvConfigRequestHeader { namespace: "n".into(), key: "k".into(), value: "v".into() };
        assert_eq!(PutKvConfigRequestHeader::read_ext_fields(&h.to_ext_fields()), Ok(h));
        let h = DeleteTopicFromNamesrvRequestHeader { topic: "T".into(), cluster_name: None };
        assert_eq!(DeleteTopicFromNamesrvRequestHeader::read_ext_fields(&h.to_ext_fields()), Ok(h));
        let h = RegisterBrokerResponseHeader { ha_server_addr: None, master_addr: Some("m:1".into()) };
        assert_eq!(RegisterBrokerResponseHeader::read_ext_fields(&h.to_ext_fields()), Ok(h));
        let h = GetKvConfigResponseHeader { value: Some(String::new()) };
        assert_eq!(GetKvConfigResponseHeader::read_ext_fields(&h.to_ext_fields()), Ok(h));
        assert_eq!(
            GetTopicsByClusterRequestHeader::read_ext_fields(&ExtFields::default()),
            Err(HeaderError::Missing { field: "cluster" })
        );
    }
}
