//! `RouteInfoManager`: the NameServer's route tables as pure state. No I/O, no clock, no lock:
//! time comes in as `now_ms`, the server wraps the manager in an `RwLock` so many route reads run
//! while one registration writes.
//!
//! ```text
//!  REGISTER_BROKER ─┐                       ┌─> pickup_topic_route(topic) -> TopicRouteData
//!  UNREGISTER ──────┤                       ├─> cluster_info()             -> ClusterInfo
//!  scan(now_ms) ────┼─> RouteInfoManager ───┼─> all_topics()/topics_by_cluster()
//!  conn closed ─────┤   topic -> brokerName -> QueueData
//!  DELETE_TOPIC ────┤   brokerName -> BrokerGroup { cluster, members by addr, leader, term }
//!  WIPE/ADD_WRITE ──┘   cluster -> brokerNames;  addr -> brokerName;  conn -> addrs
//! ```
//!
//! ## Who is brokerId 0
//!
//! A raftmq broker registers with `raftTerm`, `raftRole` and `raftNodeId`. The group's writable
//! address (brokerId 0, [`MASTER_ID`]) is the node whose LEADER claim carries the highest term seen
//! for the group:
//! - a LEADER claim is accepted when its term is above the group's leader term, or equal to it while
//!   the group has no leader (the same leader coming back after expiry: Raft has one leader per term);
//! - a lower-term claim (a deposed leader's late heartbeat) is refused, so the route never moves back;
//! - the leader reporting a non-leader role at its term or later steps down: the group keeps its read
//!   routes (queue data and followers) but has no id 0, so producers skip it;
//! - a heartbeat whose term is below the term that node reported before is stale (reordered across a
//!   reconnect): it refreshes liveness and nothing else.
//!
//! The leader term is kept while the group has any member; when the last member is gone the group,
//! its term and its queue data are forgotten (as RocketMQ forgets a group), so a group rebuilt with
//! fresh Raft state can register again without a NameServer restart.
//!
//! Every other node appears as brokerId `raftNodeId + 1` (DLedger's rule, `DLedgerRoleChangeHandler`),
//! so an unchanged RocketMQ client writes to id 0 and may pull from ids ≥ 1.
//!
//! A plain RocketMQ broker (no Raft fields) keeps Java's master/slave meaning: its `brokerId` is its
//! route id, and the latest brokerId-0 registration is the writable address unless a Raft leader holds it.
//!
//! ## Topics
//!
//! A group's queue data comes from its leader's registration, re-read when the leader changes or
//! its `DataVersion` does. While a group has no leader and no topics yet (a NameServer restarted
//! mid-election), the first member's table is taken so read routes exist. Topics missing from a new
//! table are removed only with `deleteTopicWithBrokerRegistration` (RocketMQ's key, default false).
//!
//! Invariants (checked by [`RouteInfoManager::check_invariants`] in tests): every member address
//! belongs to exactly one group; a leader is a member; every group is in its cluster's set and
//! non-empty; every queue data names a live group; each group's cached `BrokerData` is what its
//! members compute to, with id 0 present exactly when the group has a leader.

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::collections::HashMap;

use raftmq_common::protocol::body::register::ClusterInfo;
use raftmq_common::protocol::body::register::TopicConfigSerializeWrapper;
use raftmq_common::protocol::body::register::TopicList;
use raftmq_common::protocol::body::route::BrokerData;
use raftmq_common::protocol::body::route::MASTER_ID;
use raftmq_common::protocol::body::route::QueueData;
use raftmq_common::protocol::body::route::TopicRouteData;
use raftmq_common::protocol::body::topic::DataVersion;
use raftmq_common::protocol::body::topic::TopicConfig;
use raftmq_common::protocol::body::topic::perm;
use raftmq_common::protocol::header::namesrv::RaftRegistration;
use raftmq_common::protocol::header::namesrv::RaftRole;
use thiserror::Error;

/// Identifies one transport connection, so a closed connection can remove its brokers.
pub type ConnId = u64;

/// Settings of the route tables (from `NamesrvConfig`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteSettings {
    /// A broker silent for longer than this is dropped, unless it registered its own timeout.
    pub broker_channel_expired_ms: u64,
    /// Remove a group's topics that are missing from its leader's newer registration.
    pub delete_topic_with_broker_registration: bool,
}

/// One REGISTER_BROKER, header and body already decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerRegistration {
    /// `clusterName`.
    pub cluster_name: String,
    /// `brokerName`: the group.
    pub broker_name: String,
    /// `brokerAddr`: identifies the node.
    pub broker_addr: String,
    /// `haServerAddr`.
    pub ha_server_addr: String,
    /// `brokerId` as sent; the route id only for plain RocketMQ brokers.
    pub broker_id: i64,
    /// The Raft extension; `None` for a plain RocketMQ broker.
    pub raft: Option<RaftRegistration>,
    /// The broker's topic table.
    pub topic_config: TopicConfigSerializeWrapper,
    /// `heartbeatTimeoutMillis`, if the broker sent one.
    pub heartbeat_timeout_ms: Option<u64>,
    /// The connection it arrived on, if any.
    pub conn: Option<ConnId>,
}

/// What REGISTER_BROKER answers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegisterOutcome {
    /// The group's writable address, told to non-leaders (`masterAddr`).
    pub master_addr: Option<String>,
    /// The leader's `haServerAddr`, told to non-leaders.
    pub ha_server_addr: Option<String>,
    /// Whether the registering node is now the group's brokerId 0.
    pub is_writable: bool,
    /// Whether this registration changed the group's writable address.
    pub leader_changed: bool,
}

/// Why a registration was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RouteError {
    /// A required name or address is empty.
    #[error("the field {field} is empty")]
    EmptyField {
        /// The header key.
        field: &'static str,
    },
    /// `brokerId` is negative.
    #[error("the brokerId {broker_id} is negative")]
    NegativeBrokerId {
        /// What was sent.
        broker_id: i64,
    },
}

/// A broker node removed from the tables, for the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemovedBroker {
    /// Its group.
    pub broker_name: String,
    /// Its address.
    pub broker_addr: String,
    /// Whether it was the group's writable address.
    pub was_leader: bool,
}

#[derive(Debug, Clone)]
struct Member {
    broker_id: i64,
    raft: Option<RaftRegistration>,
    ha_server_addr: String,
    last_update_ms: u64,
    timeout_ms: u64,
    conn: Option<ConnId>,
    /// The topic table version of its last registration (QUERY_DATA_VERSION compares with it).
    data_version: DataVersion,
}

#[derive(Debug, Clone)]
struct BrokerGroup {
    cluster: String,
    members: BTreeMap<String, Member>,
    /// The writable address; always a key of `members`.
    leader: Option<String>,
    /// Highest accepted Raft LEADER claim; survives the leader's departure while the group lives.
    leader_term: Option<u64>,
    /// Whose table (address and version) the group's queue data was last taken from.
    topics_from: Option<(String, DataVersion)>,
    /// The group's `BrokerData`, recomputed on every change so lookups only clone it.
    route: BrokerData,
}

impl BrokerGroup {
    fn compute_route(&self, broker_name: &str) -> BrokerData {
        let mut broker_addrs = BTreeMap::new();
        if let Some(leader) = &self.leader {
            broker_addrs.insert(MASTER_ID, leader.clone());
        }
        for (addr, member) in &self.members {
            if self.leader.as_ref() == Some(addr) {
                continue;
            }
            let id = match &member.raft {
                // node_id <= RAFT_NODE_ID_MAX (checked by the header), so + 1 fits an i64.
                Some(raft) => i64::try_from(raft.node_id).ok().and_then(|id| id.checked_add(1)),
                // A Java master that lost id 0 to another registration is not routable.
                None if member.broker_id == MASTER_ID => None,
                None => Some(member.broker_id),
            };
            // Two nodes mapping to one id (a misconfigured group): the lower address keeps it.
            if let Some(id) = id {
                broker_addrs.entry(id).or_insert_with(|| addr.clone());
            }
        }
        BrokerData {
            broker_addrs,
            broker_name: broker_name.to_owned(),
            cluster: self.cluster.clone(),
            enable_acting_master: false,
        }
    }
}

/// The route tables. See the module docs for the rules.
#[derive(Debug, Clone)]
pub struct RouteInfoManager {
    settings: RouteSettings,
    topic_queue_table: HashMap<String, BTreeMap<String, QueueData>>,
    groups: HashMap<String, BrokerGroup>,
    cluster_addr_table: BTreeMap<String, BTreeSet<String>>,
    /// broker address → its group.
    addr_index: HashMap<String, String>,
    /// connection → addresses that last registered on it.
    conn_index: HashMap<ConnId, BTreeSet<String>>,
}

impl RouteInfoManager {
    /// Empty tables.
    pub fn new(settings: RouteSettings) -> Self {
        RouteInfoManager {
            settings,
            topic_queue_table: HashMap::new(),
            groups: HashMap::new(),
            cluster_addr_table: BTreeMap::new(),
            addr_index: HashMap::new(),
            conn_index: HashMap::new(),
        }
    }

    /// REGISTER_BROKER: records the node, decides the group's writable address, updates topics.
    pub fn register(&mut self, reg: BrokerRegistration, now_ms: u64) -> Result<RegisterOutcome, RouteError> {
        for (field, value) in
            [("clusterName", &reg.cluster_name), ("brokerName", &reg.broker_name), ("brokerAddr", &reg.broker_addr)]
        {
            if value.is_empty() {
                return Err(RouteError::EmptyField { field });
            }
        }
        if reg.broker_id < 0 {
            return Err(RouteError::NegativeBrokerId { broker_id: reg.broker_id });
        }

        // An address that moved to another group leaves the old one first.
        if let Some(old_group) = self.addr_index.get(&reg.broker_addr)
            && *old_group != reg.broker_name
        {
            let old_group = old_group.clone();
            self.remove_member(&old_group, &reg.broker_addr);
        }
        self.place_in_cluster(&reg.broker_name, &reg.cluster_name);

        let settings = self.settings;
        let group = self.groups.entry(reg.broker_name.clone()).or_insert_with(|| BrokerGroup {
            cluster: reg.cluster_name.clone(),
            members: BTreeMap::new(),
            leader: None,
            leader_term: None,
            topics_from: None,
            route: BrokerData::default(),
        });
        self.addr_index.insert(reg.broker_addr.clone(), reg.broker_name.clone());

        let member = group.members.entry(reg.broker_addr.clone()).or_insert_with(|| Member {
            broker_id: reg.broker_id,
            raft: None,
            ha_server_addr: String::new(),
            last_update_ms: now_ms,
            timeout_ms: settings.broker_channel_expired_ms,
            conn: None,
            data_version: reg.topic_config.data_version,
        });
        member.broker_id = reg.broker_id;
        member.ha_server_addr = reg.ha_server_addr.clone();
        member.last_update_ms = now_ms;
        member.data_version = reg.topic_config.data_version;
        member.timeout_ms = reg.heartbeat_timeout_ms.unwrap_or(settings.broker_channel_expired_ms);
        let old_conn = std::mem::replace(&mut member.conn, reg.conn);
        let stale = match (&member.raft, &reg.raft) {
            (Some(known), Some(new)) => new.term < known.term,
            _ => false,
        };
        if !stale {
            member.raft = reg.raft;
        }
        if old_conn != reg.conn {
            move_conn(&mut self.conn_index, &reg.broker_addr, old_conn, reg.conn);
        }

        let leader_before = group.leader.clone();
        if !stale {
            decide_leader(group, &reg);
        }
        let leader_changed = group.leader != leader_before;
        let is_writable = group.leader.as_ref() == Some(&reg.broker_addr);
        let take_topics = !stale
            && if is_writable {
                group.topics_from.as_ref() != Some(&(reg.broker_addr.clone(), reg.topic_config.data_version))
            } else {
                group.leader.is_none() && group.topics_from.is_none()
            };
        if take_topics {
            group.topics_from = Some((reg.broker_addr.clone(), reg.topic_config.data_version));
        }
        group.route = group.compute_route(&reg.broker_name);

        let outcome = match (&group.leader, is_writable) {
            (Some(leader), false) => RegisterOutcome {
                master_addr: Some(leader.clone()),
                ha_server_addr: group.members.get(leader).map(|m| m.ha_server_addr.clone()),
                is_writable,
                leader_changed,
            },
            _ => RegisterOutcome { master_addr: None, ha_server_addr: None, is_writable, leader_changed },
        };
        if take_topics {
            self.apply_topics(&reg.broker_name, &reg.topic_config.topic_config_table);
        }
        Ok(outcome)
    }

    /// UNREGISTER_BROKER: removes the node if it is a member of `broker_name`. Returns it if it was.
    pub fn unregister(&mut self, broker_name: &str, broker_addr: &str) -> Option<RemovedBroker> {
        if self.addr_index.get(broker_addr).map(String::as_str) != Some(broker_name) {
            return None;
        }
        self.remove_member(broker_name, broker_addr)
    }

    /// The liveness scan: drops every node silent for longer than its timeout.
    pub fn scan_not_active_brokers(&mut self, now_ms: u64) -> Vec<RemovedBroker> {
        let mut expired = Vec::new();
        for (name, group) in &self.groups {
            for (addr, member) in &group.members {
                if now_ms.saturating_sub(member.last_update_ms) > member.timeout_ms {
                    expired.push((name.clone(), addr.clone()));
                }
            }
        }
        expired.sort();
        expired.into_iter().filter_map(|(name, addr)| self.remove_member(&name, &addr)).collect()
    }

    /// A connection closed: drops at once every node whose latest registration came over it.
    pub fn connection_closed(&mut self, conn: ConnId) -> Vec<RemovedBroker> {
        let Some(addrs) = self.conn_index.remove(&conn) else {
            return Vec::new();
        };
        let mut removed = Vec::new();
        for addr in addrs {
            let Some(name) = self.addr_index.get(&addr).cloned() else { continue };
            let on_this_conn =
                self.groups.get(&name).and_then(|g| g.members.get(&addr)).is_some_and(|m| m.conn == Some(conn));
            if on_this_conn && let Some(r) = self.remove_member(&name, &addr) {
                removed.push(r);
            }
        }
        removed
    }

    /// DELETE_TOPIC_IN_NAMESRV: forgets the topic, or only its queues in `cluster`. Returns whether
    /// anything was removed.
    pub fn delete_topic(&mut self, topic: &str, cluster: Option<&str>) -> bool {
        match cluster {
            None => self.topic_queue_table.remove(topic).is_some(),
            Some(cluster) => {
                let Some(names) = self.cluster_addr_table.get(cluster) else { return false };
                let Some(queues) = self.topic_queue_table.get_mut(topic) else { return false };
                let before = queues.len();
                queues.retain(|broker_name, _| !names.contains(broker_name));
                let changed = queues.len() != before;
                if queues.is_empty() {
                    self.topic_queue_table.remove(topic);
                }
                changed
            }
        }
    }

    /// WIPE_WRITE_PERM_OF_BROKER (`mqadmin wipeWritePerm`): clears the write bit of every queue
    /// data of group `broker_name`, so producers stop choosing it while consumers still read it.
    /// Returns the number of topics changed (Java's `wipeTopicCount`: every queue data of the group,
    /// changed or not). It holds until the group's queue data is next re-read: a leader change or a
    /// new topic `DataVersion`, as in Java.
    pub fn wipe_write_perm(&mut self, broker_name: &str) -> usize {
        self.set_group_perm(broker_name, |p| p & !perm::WRITE)
    }

    /// ADD_WRITE_PERM_OF_BROKER (`mqadmin addWritePerm`): sets every queue data of group
    /// `broker_name` back to read + write, as Java does (whatever the topic's own perm). Returns
    /// the number of topics changed (`addTopicCount`).
    pub fn add_write_perm(&mut self, broker_name: &str) -> usize {
        self.set_group_perm(broker_name, |_| perm::READ_WRITE)
    }

    fn set_group_perm(&mut self, broker_name: &str, f: impl Fn(i32) -> i32) -> usize {
        let mut count = 0;
        for queues in self.topic_queue_table.values_mut() {
            if let Some(q) = queues.get_mut(broker_name) {
                q.perm = f(q.perm);
                count += 1;
            }
        }
        count
    }

    /// GET_ROUTEINFO_BY_TOPIC: the topic's queues and groups, or `None` when the topic is unknown.
    pub fn pickup_topic_route(&self, topic: &str) -> Option<TopicRouteData> {
        let queues = self.topic_queue_table.get(topic)?;
        let broker_datas: Vec<BrokerData> =
            queues.keys().filter_map(|name| self.groups.get(name)).map(|g| g.route.clone()).collect();
        if broker_datas.is_empty() {
            return None;
        }
        Some(TopicRouteData {
            broker_datas,
            filter_server_table: BTreeMap::new(),
            order_topic_conf: None,
            queue_datas: queues.values().cloned().collect(),
        })
    }

    /// GET_BROKER_CLUSTER_INFO.
    pub fn cluster_info(&self) -> ClusterInfo {
        ClusterInfo {
            broker_addr_table: self.groups.iter().map(|(name, g)| (name.clone(), g.route.clone())).collect(),
            cluster_addr_table: self.cluster_addr_table.clone(),
        }
    }

    /// Replaces the settings (UPDATE_NAMESRV_CONFIG); a member's timeout follows at its next
    /// registration.
    pub fn set_settings(&mut self, settings: RouteSettings) {
        self.settings = settings;
    }

    /// GET_SYSTEM_TOPIC_LIST_FROM_NS: every cluster name and group name (RocketMQ gives each a
    /// topic of its own) and one broker's address, which the caller asks for that broker's system
    /// topics (GET_SYSTEM_TOPIC_LIST_FROM_BROKER): a leader's when a group has one.
    pub fn system_topics(&self) -> TopicList {
        let mut topic_list = BTreeSet::new();
        for (cluster, names) in &self.cluster_addr_table {
            topic_list.insert(cluster.clone());
            topic_list.extend(names.iter().cloned());
        }
        let mut groups: Vec<_> = self.groups.iter().collect();
        groups.sort_by(|a, b| a.0.cmp(b.0));
        let broker_addr = groups
            .iter()
            .find_map(|(_, g)| g.leader.clone())
            .or_else(|| groups.iter().find_map(|(_, g)| g.route.broker_addrs.values().next().cloned()));
        TopicList { broker_addr, topic_list }
    }

    /// QUERY_DATA_VERSION (`isBrokerTopicConfigChanged`): whether `version` differs from what the
    /// broker at `broker_addr` last registered (true for an unknown broker), and that registered
    /// version. An unchanged broker counts as alive at `now_ms`, as its registration would.
    pub fn query_data_version(
        &mut self,
        broker_addr: &str,
        version: &DataVersion,
        now_ms: u64,
    ) -> (bool, Option<DataVersion>) {
        let member = self
            .addr_index
            .get(broker_addr)
            .and_then(|name| self.groups.get_mut(name))
            .and_then(|group| group.members.get_mut(broker_addr));
        match member {
            Some(m) => {
                let changed = m.data_version != *version;
                if !changed {
                    m.last_update_ms = now_ms;
                }
                (changed, Some(m.data_version))
            }
            None => (true, None),
        }
    }

    /// Topics whose first group's queue data carries `flag` in its sysFlag, and, with
    /// `without`, not that flag too (`getUnitTopics`, `getHasUnitSubTopicList`,
    /// `getHasUnitSubUnUnitTopicList`: Java looks at the first queue data only).
    pub fn topics_with_sys_flag(&self, flag: i32, without: Option<i32>) -> TopicList {
        let topic_list = self
            .topic_queue_table
            .iter()
            .filter(|(_, queues)| {
                queues.values().next().is_some_and(|q| {
                    q.topic_sys_flag & flag == flag && without.is_none_or(|w| q.topic_sys_flag & w == 0)
                })
            })
            .map(|(topic, _)| topic.clone())
            .collect();
        TopicList { broker_addr: None, topic_list }
    }

    /// GET_ALL_TOPIC_LIST_FROM_NAMESERVER.
    pub fn all_topics(&self) -> TopicList {
        TopicList { broker_addr: None, topic_list: self.topic_queue_table.keys().cloned().collect() }
    }

    /// GET_TOPICS_BY_CLUSTER: topics with queues on any group of `cluster`.
    pub fn topics_by_cluster(&self, cluster: &str) -> TopicList {
        let mut topic_list = BTreeSet::new();
        if let Some(names) = self.cluster_addr_table.get(cluster) {
            for (topic, queues) in &self.topic_queue_table {
                if queues.keys().any(|name| names.contains(name)) {
                    topic_list.insert(topic.clone());
                }
            }
        }
        TopicList { broker_addr: None, topic_list }
    }

    /// The group's route entry, if the group is live.
    pub fn broker_data(&self, broker_name: &str) -> Option<&BrokerData> {
        self.groups.get(broker_name).map(|g| &g.route)
    }

    /// The group's writable address, if it has one.
    pub fn leader_of(&self, broker_name: &str) -> Option<&str> {
        self.groups.get(broker_name).and_then(|g| g.leader.as_deref())
    }

    /// The group's highest accepted Raft leader term.
    pub fn leader_term_of(&self, broker_name: &str) -> Option<u64> {
        self.groups.get(broker_name).and_then(|g| g.leader_term)
    }

    /// Live broker nodes.
    pub fn live_broker_count(&self) -> usize {
        self.addr_index.len()
    }

    /// Known topics.
    pub fn topic_count(&self) -> usize {
        self.topic_queue_table.len()
    }

    /// Asserts the invariants listed in the module docs; panics with a description when one fails.
    /// For tests: the tables are built only by the methods above, which keep them.
    pub fn check_invariants(&self) {
        let mut member_count = 0;
        for (name, group) in &self.groups {
            assert!(!group.members.is_empty(), "group {name} is empty");
            member_count += group.members.len();
            for addr in group.members.keys() {
                assert_eq!(self.addr_index.get(addr), Some(name), "addr index of {addr}");
            }
            if let Some(leader) = &group.leader {
                assert!(group.members.contains_key(leader), "leader {leader} of {name} is not a member");
            }
            assert!(
                self.cluster_addr_table.get(&group.cluster).is_some_and(|s| s.contains(name)),
                "group {name} missing from cluster {}",
                group.cluster
            );
            assert_eq!(group.route, group.compute_route(name), "stale route cache of {name}");
            assert_eq!(group.route.broker_addrs.contains_key(&MASTER_ID), group.leader.is_some());
            assert!(group.route.broker_addrs.keys().all(|id| *id >= 0));
        }
        assert_eq!(member_count, self.addr_index.len(), "addr index has extra entries");
        for (cluster, names) in &self.cluster_addr_table {
            assert!(!names.is_empty(), "cluster {cluster} is empty");
            for name in names {
                assert_eq!(self.groups.get(name).map(|g| g.cluster.as_str()), Some(cluster.as_str()));
            }
        }
        for (topic, queues) in &self.topic_queue_table {
            assert!(!queues.is_empty(), "topic {topic} has no queues");
            for name in queues.keys() {
                assert!(self.groups.contains_key(name), "topic {topic} names dead group {name}");
            }
        }
        for (conn, addrs) in &self.conn_index {
            for addr in addrs {
                let member =
                    self.addr_index.get(addr).and_then(|n| self.groups.get(n)).and_then(|g| g.members.get(addr));
                assert!(member.is_some_and(|m| m.conn == Some(*conn)), "conn {conn} lists {addr}");
            }
        }
    }

    fn place_in_cluster(&mut self, broker_name: &str, cluster: &str) {
        if let Some(group) = self.groups.get_mut(broker_name)
            && group.cluster != cluster
        {
            let old = std::mem::replace(&mut group.cluster, cluster.to_owned());
            remove_from_cluster(&mut self.cluster_addr_table, &old, broker_name);
        }
        self.cluster_addr_table.entry(cluster.to_owned()).or_default().insert(broker_name.to_owned());
    }

    fn apply_topics(&mut self, broker_name: &str, table: &BTreeMap<String, TopicConfig>) {
        for (topic, config) in table {
            let queue = QueueData {
                broker_name: broker_name.to_owned(),
                perm: config.perm,
                read_queue_nums: config.read_queue_nums,
                topic_sys_flag: config.topic_sys_flag,
                write_queue_nums: config.write_queue_nums,
            };
            self.topic_queue_table.entry(topic.clone()).or_default().insert(broker_name.to_owned(), queue);
        }
        if self.settings.delete_topic_with_broker_registration {
            self.topic_queue_table.retain(|topic, queues| {
                if !table.contains_key(topic) {
                    queues.remove(broker_name);
                }
                !queues.is_empty()
            });
        }
    }

    fn remove_member(&mut self, broker_name: &str, addr: &str) -> Option<RemovedBroker> {
        let group = self.groups.get_mut(broker_name)?;
        let member = group.members.remove(addr)?;
        self.addr_index.remove(addr);
        move_conn(&mut self.conn_index, addr, member.conn, None);
        let was_leader = group.leader.as_deref() == Some(addr);
        if was_leader {
            group.leader = None;
        }
        if group.members.is_empty() {
            let cluster = group.cluster.clone();
            self.groups.remove(broker_name);
            remove_from_cluster(&mut self.cluster_addr_table, &cluster, broker_name);
            self.topic_queue_table.retain(|_, queues| {
                queues.remove(broker_name);
                !queues.is_empty()
            });
        } else {
            group.route = group.compute_route(broker_name);
        }
        Some(RemovedBroker { broker_name: broker_name.to_owned(), broker_addr: addr.to_owned(), was_leader })
    }
}

/// Applies one fresh (not stale) registration to the group's choice of writable address.
fn decide_leader(group: &mut BrokerGroup, reg: &BrokerRegistration) {
    let addr = &reg.broker_addr;
    let is_leader = group.leader.as_ref() == Some(addr);
    match &reg.raft {
        Some(raft) if raft.role == RaftRole::Leader => {
            let accept = match (group.leader_term, &group.leader) {
                (None, _) => true,
                (Some(term), Some(_)) if is_leader => raft.term >= term,
                (Some(term), Some(_)) => raft.term > term,
                (Some(term), None) => raft.term >= term,
            };
            // A refused claim changes nothing: a lower-term claim is a deposed leader's late heartbeat.
            if accept {
                group.leader = Some(addr.clone());
                group.leader_term = Some(raft.term);
            }
        }
        Some(raft) => {
            if is_leader && group.leader_term.is_none_or(|term| raft.term >= term) {
                group.leader = None;
            }
        }
        None if reg.broker_id == MASTER_ID => {
            // Java semantics: the latest master registration wins, unless a Raft leader holds id 0.
            let held_by_raft = group
                .leader
                .as_ref()
                .and_then(|leader| group.members.get(leader))
                .is_some_and(|m| m.raft.is_some() && !is_leader);
            if !held_by_raft {
                group.leader = Some(addr.clone());
            }
        }
        None => {
            if is_leader {
                group.leader = None;
            }
        }
    }
}

fn move_conn(index: &mut HashMap<ConnId, BTreeSet<String>>, addr: &str, old: Option<ConnId>, new: Option<ConnId>) {
    if let Some(old) = old
        && let Some(addrs) = index.get_mut(&old)
    {
        addrs.remove(addr);
        if addrs.is_empty() {
            index.remove(&old);
        }
    }
    if let Some(new) = new {
        index.entry(new).or_default().insert(addr.to_owned());
    }
}

fn remove_from_cluster(table: &mut BTreeMap<String, BTreeSet<String>>, cluster: &str, broker_name: &str) {
    if let Some(names) = table.get_mut(cluster) {
        names.remove(broker_name);
        if names.is_empty() {
            table.remove(cluster);
        }
    }
}

#[cfg(test)]
mod tests;
