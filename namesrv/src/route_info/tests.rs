//! Unit tests of every route-table transition, and the property that heartbeats of a group whose
//! leadership moves through increasing terms, delivered in any order, end at the newest leader.

use proptest::prelude::*;
use raftmq_common::protocol::body::topic::perm;

use super::*;

const EXPIRY_MS: u64 = 120_000;
const T0: u64 = 1_000_000;

fn settings() -> RouteSettings {
    RouteSettings { broker_channel_expired_ms: EXPIRY_MS, delete_topic_with_broker_registration: false }
}

fn addr(node: u64) -> String {
    format!("10.0.0.{node}:10911")
}

fn table(counter: i64, topics: &[(&str, i32)]) -> TopicConfigSerializeWrapper {
    let mut wrapper = TopicConfigSerializeWrapper {
        data_version: DataVersion { counter, timestamp: 1_700_000_000_000 },
        ..Default::default()
    };
    for (name, queues) in topics {
        let config = TopicConfig { read_queue_nums: *queues, write_queue_nums: *queues, ..TopicConfig::new(*name) };
        wrapper.topic_config_table.insert((*name).to_owned(), config);
    }
    wrapper
}

/// Node `node` of `broker-a` in cluster `C`, reporting `role` at `term`, with topic `T` (8 queues).
fn raft(node: u64, term: u64, role: RaftRole) -> BrokerRegistration {
    BrokerRegistration {
        cluster_name: "C".into(),
        broker_name: "broker-a".into(),
        broker_addr: addr(node),
        ha_server_addr: format!("10.0.0.{node}:40911"),
        broker_id: if role == RaftRole::Leader { 0 } else { node as i64 + 1 },
        raft: Some(RaftRegistration { term, role, node_id: node }),
        topic_config: table(1, &[("T", 8)]),
        heartbeat_timeout_ms: None,
        conn: Some(node),
    }
}

fn java(name: &str, addr: &str, broker_id: i64) -> BrokerRegistration {
    BrokerRegistration {
        cluster_name: "C".into(),
        broker_name: name.into(),
        broker_addr: addr.into(),
        ha_server_addr: String::new(),
        broker_id,
        raft: None,
        topic_config: table(1, &[("J", 4)]),
        heartbeat_timeout_ms: None,
        conn: None,
    }
}

fn reg(m: &mut RouteInfoManager, r: BrokerRegistration, now_ms: u64) -> RegisterOutcome {
    let outcome = m.register(r, now_ms).expect("valid registration");
    m.check_invariants();
    outcome
}

fn ids(m: &RouteInfoManager, broker_name: &str) -> Vec<(i64, String)> {
    m.broker_data(broker_name).map(|b| b.broker_addrs.clone().into_iter().collect()).unwrap_or_default()
}

fn queues(m: &RouteInfoManager, topic: &str) -> Vec<(String, i32)> {
    m.pickup_topic_route(topic)
        .map(|r| r.queue_datas.into_iter().map(|q| (q.broker_name, q.write_queue_nums)).collect())
        .unwrap_or_default()
}

fn three_node_group(m: &mut RouteInfoManager, leader: u64, term: u64) {
    for node in 0..3 {
        let role = if node == leader { RaftRole::Leader } else { RaftRole::Follower };
        reg(m, raft(node, term, role), T0);
    }
}

#[test]
fn first_leader_registration_creates_group_topic_and_cluster() {
    let mut m = RouteInfoManager::new(settings());
    let out = reg(&mut m, raft(1, 3, RaftRole::Leader), T0);
    assert!(out.is_writable && out.leader_changed);
    assert_eq!(out.master_addr, None);
    assert_eq!(ids(&m, "broker-a"), vec![(0, addr(1))]);
    let route = m.pickup_topic_route("T").expect("route");
    assert_eq!(route.queue_datas.len(), 1);
    assert_eq!(route.queue_datas[0].perm, perm::READ_WRITE);
    assert_eq!(route.broker_datas[0].cluster, "C");
    assert_eq!(m.cluster_info().cluster_addr_table["C"], BTreeSet::from(["broker-a".to_owned()]));
    assert_eq!(m.leader_term_of("broker-a"), Some(3));
}

#[test]
fn followers_appear_as_node_id_plus_one_and_learn_the_master() {
    let mut m = RouteInfoManager::new(settings());
    three_node_group(&mut m, 0, 2);
    assert_eq!(ids(&m, "broker-a"), vec![(0, addr(0)), (2, addr(1)), (3, addr(2))]);
    let out = reg(&mut m, raft(2, 2, RaftRole::Follower), T0 + 1);
    assert!(!out.is_writable && !out.leader_changed);
    assert_eq!(out.master_addr, Some(addr(0)));
    assert_eq!(out.ha_server_addr, Some("10.0.0.0:40911".to_owned()));
}

#[test]
fn followers_never_change_topics_while_a_leader_exists() {
    let mut m = RouteInfoManager::new(settings());
    three_node_group(&mut m, 0, 2);
    let mut r = raft(1, 2, RaftRole::Follower);
    r.topic_config = table(9, &[("T", 1), ("FOLLOWER_ONLY", 1)]);
    reg(&mut m, r, T0 + 1);
    assert_eq!(queues(&m, "T"), vec![("broker-a".to_owned(), 8)]);
    assert!(m.pickup_topic_route("FOLLOWER_ONLY").is_none());
}

#[test]
fn re_register_with_same_data_version_keeps_topics() {
    let mut m = RouteInfoManager::new(settings());
    reg(&mut m, raft(0, 1, RaftRole::Leader), T0);
    let mut r = raft(0, 1, RaftRole::Leader);
    r.topic_config = table(1, &[("T", 2), ("NEW", 2)]);
    reg(&mut m, r, T0 + 1);
    // Same DataVersion: RocketMQ does not re-read the table.
    assert_eq!(queues(&m, "T"), vec![("broker-a".to_owned(), 8)]);
    assert!(m.pickup_topic_route("NEW").is_none());
}

#[test]
fn re_register_with_topic_changes_updates_and_adds() {
    let mut m = RouteInfoManager::new(settings());
    reg(&mut m, raft(0, 1, RaftRole::Leader), T0);
    let mut r = raft(0, 1, RaftRole::Leader);
    r.topic_config = table(2, &[("T", 2), ("NEW", 4)]);
    reg(&mut m, r, T0 + 1);
    assert_eq!(queues(&m, "T"), vec![("broker-a".to_owned(), 2)]);
    assert_eq!(queues(&m, "NEW"), vec![("broker-a".to_owned(), 4)]);
    // A topic missing from the new table stays (deleteTopicWithBrokerRegistration = false).
    let mut r = raft(0, 1, RaftRole::Leader);
    r.topic_config = table(3, &[("NEW", 4)]);
    reg(&mut m, r, T0 + 2);
    assert_eq!(queues(&m, "T"), vec![("broker-a".to_owned(), 2)]);
}

#[test]
fn re_register_removes_missing_topics_when_configured() {
    let mut m = RouteInfoManager::new(RouteSettings { delete_topic_with_broker_registration: true, ..settings() });
    reg(&mut m, raft(0, 1, RaftRole::Leader), T0);
    let mut other = java("broker-b", "10.0.1.1:10911", 0);
    other.topic_config = table(1, &[("T", 4)]);
    reg(&mut m, other, T0);
    assert_eq!(queues(&m, "T").len(), 2);
    let mut r = raft(0, 1, RaftRole::Leader);
    r.topic_config = table(2, &[("OTHER", 1)]);
    reg(&mut m, r, T0 + 1);
    // Only broker-a's queues of T go; broker-b still serves it.
    assert_eq!(queues(&m, "T"), vec![("broker-b".to_owned(), 4)]);
    assert_eq!(queues(&m, "OTHER"), vec![("broker-a".to_owned(), 1)]);
}

#[test]
fn higher_term_leader_takes_over_and_old_leader_becomes_a_follower() {
    let mut m = RouteInfoManager::new(settings());
    three_node_group(&mut m, 0, 2);
    let mut r = raft(1, 3, RaftRole::Leader);
    r.topic_config = table(1, &[("T", 8), ("ONLY_ON_NEW_LEADER", 2)]);
    let out = reg(&mut m, r, T0 + 1);
    assert!(out.is_writable && out.leader_changed);
    assert_eq!(m.leader_of("broker-a"), Some(addr(1).as_str()));
    // The old leader (node 0) still claims term 2 until it hears of term 3: it shows as id 1.
    assert_eq!(ids(&m, "broker-a"), vec![(0, addr(1)), (1, addr(0)), (3, addr(2))]);
    // A new leader's table is read even with the same DataVersion as the old leader's.
    assert_eq!(queues(&m, "ONLY_ON_NEW_LEADER").len(), 1);
}

#[test]
fn deposed_leaders_late_heartbeat_never_takes_the_route_back() {
    let mut m = RouteInfoManager::new(settings());
    three_node_group(&mut m, 0, 2);
    reg(&mut m, raft(1, 3, RaftRole::Leader), T0 + 1);
    let out = reg(&mut m, raft(0, 2, RaftRole::Leader), T0 + 2);
    assert!(!out.is_writable && !out.leader_changed);
    assert_eq!(out.master_addr, Some(addr(1)));
    assert_eq!(m.leader_of("broker-a"), Some(addr(1).as_str()));
    assert_eq!(m.leader_term_of("broker-a"), Some(3));
}

#[test]
fn a_rival_claim_in_the_same_term_keeps_the_incumbent() {
    let mut m = RouteInfoManager::new(settings());
    reg(&mut m, raft(0, 4, RaftRole::Leader), T0);
    reg(&mut m, raft(1, 4, RaftRole::Leader), T0);
    assert_eq!(m.leader_of("broker-a"), Some(addr(0).as_str()));
}

#[test]
fn leader_stepping_down_keeps_read_routes_without_a_writable_address() {
    let mut m = RouteInfoManager::new(settings());
    three_node_group(&mut m, 0, 2);
    let out = reg(&mut m, raft(0, 3, RaftRole::Follower), T0 + 1);
    assert!(out.leader_changed && !out.is_writable);
    assert_eq!(m.leader_of("broker-a"), None);
    let route = m.pickup_topic_route("T").expect("read route stays");
    assert!(!route.broker_datas[0].broker_addrs.contains_key(&MASTER_ID));
    assert_eq!(route.broker_datas[0].broker_addrs.len(), 3);
    // A candidate never becomes the writable address.
    reg(&mut m, raft(1, 4, RaftRole::Candidate), T0 + 2);
    assert_eq!(m.leader_of("broker-a"), None);
    // The next leader (term 4) is accepted; a late claim from term 2 is not.
    reg(&mut m, raft(0, 2, RaftRole::Leader), T0 + 3);
    assert_eq!(m.leader_of("broker-a"), None);
    reg(&mut m, raft(1, 4, RaftRole::Leader), T0 + 4);
    assert_eq!(m.leader_of("broker-a"), Some(addr(1).as_str()));
}

#[test]
fn stale_heartbeat_from_a_node_refreshes_liveness_only() {
    let mut m = RouteInfoManager::new(settings());
    reg(&mut m, raft(0, 5, RaftRole::Leader), T0);
    // The node's own follower heartbeat from term 4, delivered late over a new connection.
    let mut late = raft(0, 4, RaftRole::Follower);
    late.conn = Some(99);
    reg(&mut m, late, T0 + EXPIRY_MS);
    assert_eq!(m.leader_of("broker-a"), Some(addr(0).as_str()));
    // Liveness was refreshed: not expired at T0 + EXPIRY_MS + 1.
    assert!(m.scan_not_active_brokers(T0 + EXPIRY_MS + 1).is_empty());
}

#[test]
fn a_leader_that_expired_can_reclaim_at_its_term_but_not_below() {
    let mut m = RouteInfoManager::new(settings());
    three_node_group(&mut m, 0, 2);
    reg(&mut m, raft(1, 2, RaftRole::Follower), T0 + EXPIRY_MS);
    reg(&mut m, raft(2, 2, RaftRole::Follower), T0 + EXPIRY_MS);
    let removed = m.scan_not_active_brokers(T0 + EXPIRY_MS + 1);
    m.check_invariants();
    assert_eq!(removed, vec![RemovedBroker { broker_name: "broker-a".into(), broker_addr: addr(0), was_leader: true }]);
    assert_eq!(m.leader_of("broker-a"), None);
    assert_eq!(m.leader_term_of("broker-a"), Some(2));
    // Followers keep the read route.
    assert_eq!(ids(&m, "broker-a"), vec![(2, addr(1)), (3, addr(2))]);
    assert_eq!(queues(&m, "T").len(), 1);
    // A claim below the group's term (here from a node new to the NameServer) is refused; the
    // same term (the same leader coming back) is accepted.
    reg(&mut m, raft(3, 1, RaftRole::Leader), T0 + EXPIRY_MS + 2);
    assert_eq!(m.leader_of("broker-a"), None);
    reg(&mut m, raft(0, 2, RaftRole::Leader), T0 + EXPIRY_MS + 3);
    assert_eq!(m.leader_of("broker-a"), Some(addr(0).as_str()));
}

#[test]
fn unregister_follower_leader_and_last_member() {
    let mut m = RouteInfoManager::new(settings());
    three_node_group(&mut m, 0, 2);
    assert_eq!(m.unregister("broker-b", &addr(1)), None, "wrong group is a no-op");
    let r = m.unregister("broker-a", &addr(2)).expect("member");
    assert!(!r.was_leader);
    m.check_invariants();
    assert_eq!(ids(&m, "broker-a"), vec![(0, addr(0)), (2, addr(1))]);
    let r = m.unregister("broker-a", &addr(0)).expect("member");
    assert!(r.was_leader);
    m.check_invariants();
    assert_eq!(ids(&m, "broker-a"), vec![(2, addr(1))]);
    assert!(m.pickup_topic_route("T").is_some());
    m.unregister("broker-a", &addr(1)).expect("member");
    m.check_invariants();
    assert!(m.broker_data("broker-a").is_none());
    assert!(m.pickup_topic_route("T").is_none());
    assert!(m.cluster_info().cluster_addr_table.is_empty());
    assert_eq!(m.live_broker_count(), 0);
    assert_eq!(m.topic_count(), 0);
    assert_eq!(m.unregister("broker-a", &addr(1)), None);
}

#[test]
fn expiry_drops_only_silent_brokers_and_honours_their_own_timeout() {
    let mut m = RouteInfoManager::new(settings());
    reg(&mut m, raft(0, 1, RaftRole::Leader), T0);
    let mut quick = raft(1, 1, RaftRole::Follower);
    quick.heartbeat_timeout_ms = Some(1_000);
    reg(&mut m, quick, T0);
    reg(&mut m, raft(2, 1, RaftRole::Follower), T0 + 60_000);
    assert!(m.scan_not_active_brokers(T0 + 1_000).is_empty(), "exactly at the timeout is still live");
    let removed = m.scan_not_active_brokers(T0 + 1_001);
    assert_eq!(removed.iter().map(|r| r.broker_addr.clone()).collect::<Vec<_>>(), vec![addr(1)]);
    let removed = m.scan_not_active_brokers(T0 + EXPIRY_MS + 1);
    assert_eq!(removed.iter().map(|r| r.broker_addr.clone()).collect::<Vec<_>>(), vec![addr(0)]);
    m.check_invariants();
    assert_eq!(m.leader_of("broker-a"), None);
    let removed = m.scan_not_active_brokers(T0 + 60_000 + EXPIRY_MS + 1);
    assert_eq!(removed.len(), 1);
    m.check_invariants();
    assert_eq!(m.topic_count(), 0);
    // A clock that goes backwards never expires anyone.
    reg(&mut m, raft(0, 1, RaftRole::Leader), T0);
    assert!(m.scan_not_active_brokers(0).is_empty());
}

#[test]
fn connection_close_removes_the_brokers_registered_on_it() {
    let mut m = RouteInfoManager::new(settings());
    three_node_group(&mut m, 0, 2);
    // Node 2 reconnects: its registration moves to connection 7.
    let mut moved = raft(2, 2, RaftRole::Follower);
    moved.conn = Some(7);
    reg(&mut m, moved, T0 + 1);
    assert!(m.connection_closed(2).is_empty(), "the old connection no longer owns node 2");
    let removed = m.connection_closed(0);
    m.check_invariants();
    assert_eq!(removed, vec![RemovedBroker { broker_name: "broker-a".into(), broker_addr: addr(0), was_leader: true }]);
    assert_eq!(m.leader_of("broker-a"), None);
    assert_eq!(m.connection_closed(7).len(), 1);
    assert!(m.connection_closed(12345).is_empty());
    m.check_invariants();
    assert_eq!(ids(&m, "broker-a"), vec![(2, addr(1))]);
}

#[test]
fn delete_topic_everywhere_or_in_one_cluster() {
    let mut m = RouteInfoManager::new(settings());
    reg(&mut m, raft(0, 1, RaftRole::Leader), T0);
    let mut other = java("broker-b", "10.0.1.1:10911", 0);
    other.cluster_name = "D".into();
    other.topic_config = table(1, &[("T", 4)]);
    reg(&mut m, other, T0);
    assert!(!m.delete_topic("T", Some("NO_SUCH_CLUSTER")));
    assert!(m.delete_topic("T", Some("D")));
    m.check_invariants();
    assert_eq!(queues(&m, "T"), vec![("broker-a".to_owned(), 8)]);
    assert!(m.delete_topic("T", None));
    assert!(!m.delete_topic("T", None));
    m.check_invariants();
    assert!(m.pickup_topic_route("T").is_none());
    // A later registration with an unchanged DataVersion does not bring it back (RocketMQ alike).
    reg(&mut m, raft(0, 1, RaftRole::Leader), T0 + 1);
    assert!(m.pickup_topic_route("T").is_none());
}

#[test]
fn java_master_slave_semantics_without_raft_fields() {
    let mut m = RouteInfoManager::new(settings());
    reg(&mut m, java("broker-j", "m1:10911", 0), T0);
    let out = reg(&mut m, java("broker-j", "s1:10911", 1), T0);
    assert_eq!(out.master_addr, Some("m1:10911".into()));
    assert_eq!(ids(&m, "broker-j"), vec![(0, "m1:10911".into()), (1, "s1:10911".into())]);
    // A new master registration replaces the old one, which drops out of the route.
    reg(&mut m, java("broker-j", "m2:10911", 0), T0 + 1);
    assert_eq!(ids(&m, "broker-j"), vec![(0, "m2:10911".into()), (1, "s1:10911".into())]);
    // The master re-registering as a slave gives up id 0.
    reg(&mut m, java("broker-j", "m2:10911", 2), T0 + 2);
    assert_eq!(ids(&m, "broker-j"), vec![(1, "s1:10911".into()), (2, "m2:10911".into())]);
    // A Raft leader holds id 0 against plain master registrations.
    let mut r = raft(5, 1, RaftRole::Leader);
    r.broker_name = "broker-j".into();
    reg(&mut m, r, T0 + 3);
    reg(&mut m, java("broker-j", "m1:10911", 0), T0 + 4);
    assert_eq!(m.leader_of("broker-j"), Some(addr(5).as_str()));
}

#[test]
fn an_address_that_moves_group_or_cluster_leaves_the_old_one() {
    let mut m = RouteInfoManager::new(settings());
    reg(&mut m, raft(0, 1, RaftRole::Leader), T0);
    let mut moved = raft(0, 1, RaftRole::Leader);
    moved.broker_name = "broker-z".into();
    reg(&mut m, moved, T0 + 1);
    assert!(m.broker_data("broker-a").is_none());
    assert_eq!(queues(&m, "T"), vec![("broker-z".to_owned(), 8)]);
    let mut recluster = raft(0, 1, RaftRole::Leader);
    recluster.broker_name = "broker-z".into();
    recluster.cluster_name = "E".into();
    reg(&mut m, recluster, T0 + 2);
    let info = m.cluster_info();
    assert_eq!(info.cluster_addr_table.keys().collect::<Vec<_>>(), vec!["E"]);
    assert_eq!(info.broker_addr_table["broker-z"].cluster, "E");
}

#[test]
fn topic_lists_and_cluster_info() {
    let mut m = RouteInfoManager::new(settings());
    reg(&mut m, raft(0, 1, RaftRole::Leader), T0);
    let mut other = java("broker-b", "10.0.1.1:10911", 0);
    other.cluster_name = "D".into();
    reg(&mut m, other, T0);
    assert_eq!(m.all_topics().topic_list, BTreeSet::from(["J".to_owned(), "T".to_owned()]));
    assert_eq!(m.topics_by_cluster("C").topic_list, BTreeSet::from(["T".to_owned()]));
    assert_eq!(m.topics_by_cluster("D").topic_list, BTreeSet::from(["J".to_owned()]));
    assert!(m.topics_by_cluster("X").topic_list.is_empty());
    let info = m.cluster_info();
    assert_eq!(info.broker_addr_table.len(), 2);
    assert_eq!(info.broker_addr_table["broker-a"].broker_addrs[&0], addr(0));
}

#[test]
fn invalid_registrations_are_refused_and_change_nothing() {
    let mut m = RouteInfoManager::new(settings());
    let mut r = raft(0, 1, RaftRole::Leader);
    r.broker_name.clear();
    assert_eq!(m.register(r, T0), Err(RouteError::EmptyField { field: "brokerName" }));
    let mut r = raft(0, 1, RaftRole::Leader);
    r.broker_addr.clear();
    assert_eq!(m.register(r, T0), Err(RouteError::EmptyField { field: "brokerAddr" }));
    assert_eq!(m.register(java("b", "a:1", -1), T0), Err(RouteError::NegativeBrokerId { broker_id: -1 }));
    m.check_invariants();
    assert_eq!(m.live_broker_count(), 0);
}

#[test]
fn followers_seed_read_routes_until_a_leader_registers() {
    let mut m = RouteInfoManager::new(settings());
    let mut f = raft(1, 3, RaftRole::Follower);
    f.topic_config = table(5, &[("T", 8)]);
    reg(&mut m, f, T0);
    let route = m.pickup_topic_route("T").expect("read route from a follower");
    assert_eq!(route.broker_datas[0].broker_addrs, BTreeMap::from([(2, addr(1))]));
    let mut f2 = raft(2, 3, RaftRole::Follower);
    f2.topic_config = table(6, &[("T", 1), ("X", 1)]);
    reg(&mut m, f2, T0);
    assert!(m.pickup_topic_route("X").is_none(), "only the first table seeds");
    let mut l = raft(0, 3, RaftRole::Leader);
    l.topic_config = table(6, &[("T", 2)]);
    reg(&mut m, l, T0 + 1);
    assert_eq!(queues(&m, "T"), vec![("broker-a".to_owned(), 2)]);
}

/// One heartbeat: node, term, role.
type Beat = (u64, u64, RaftRole);

/// Heartbeats of a 3-node group whose leadership moves through `epochs` (term step, leader), plus
/// failed candidacies between epochs; returns them with the final leader.
fn leadership_history(epochs: &[(u64, u64, u8)], candidates: &[(u64, bool)]) -> (Vec<Beat>, u64) {
    let mut beats = Vec::new();
    let mut term = 0;
    let mut leader = 0;
    for (i, (step, new_leader, repeats)) in epochs.iter().enumerate() {
        // Steps of at least 2 leave room for a failed election between two leaders.
        let failed_election_term = term + 1;
        term += step + 2;
        leader = *new_leader;
        if let Some((node, happened)) = candidates.get(i)
            && *happened
        {
            beats.push((*node, failed_election_term, RaftRole::Candidate));
        }
        for node in 0..3 {
            for _ in 0..=*repeats {
                let role = if node == leader { RaftRole::Leader } else { RaftRole::Follower };
                beats.push((node, term, role));
            }
        }
    }
    (beats, leader)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Any interleaving (even reordering one node's own heartbeats) of the heartbeats of a group whose
    /// leadership moves through increasing terms ends with brokerId 0 at the newest leader, the
    /// others at raftNodeId + 1; the group's leader term never decreases along the way.
    #[test]
    fn any_interleaving_of_heartbeats_ends_at_the_newest_leader(
        epochs in proptest::collection::vec((0u64..3, 0u64..3, 0u8..3), 1..6),
        candidates in proptest::collection::vec((0u64..3, any::<bool>()), 6),
        order in proptest::collection::vec(any::<u32>(), 64),
    ) {
        let (beats, newest_leader) = leadership_history(&epochs, &candidates);
        // A permutation from random sort keys (cycled if there are more beats than keys).
        let mut shuffled: Vec<(u32, usize, Beat)> =
            beats.into_iter().enumerate().map(|(i, b)| (order[i % order.len()], i, b)).collect();
        shuffled.sort_by_key(|(key, i, _)| (*key, *i));

        let mut m = RouteInfoManager::new(settings());
        let mut last_term = None;
        for (step, (_, _, (node, term, role))) in shuffled.into_iter().enumerate() {
            m.register(raft(node, term, role), T0 + step as u64).expect("valid");
            m.check_invariants();
            let now_term = m.leader_term_of("broker-a");
            prop_assert!(now_term >= last_term, "leader term went back from {last_term:?} to {now_term:?}");
            last_term = now_term;
        }
        let newest = addr(newest_leader);
        prop_assert_eq!(m.leader_of("broker-a"), Some(newest.as_str()));
        let expected: Vec<(i64, String)> = std::iter::once((0, addr(newest_leader)))
            .chain((0..3u64).filter(|n| *n != newest_leader).map(|n| (n as i64 + 1, addr(n))))
            .collect::<BTreeMap<_, _>>()
            .into_iter()
            .collect();
        prop_assert_eq!(ids(&m, "broker-a"), expected);
    }
}
