//! The cluster under test: where every process lives and how it is configured.
//!
//! ```text
//! 127.0.0.1        the harness's clients (producers, consumers, admin)
//! 127.0.0.2:9876   the NameServer (`namesrv`)             gid 6002
//! 127.0.0.3:9876   the second NameServer (`namesrv2`, `--namesrvs 2`)  gid 6003
//! 127.0.0.1g r     group g (broker-a, broker-b), replica r = 1..=5, e.g. 127.0.0.11..13   gid 60gr
//! 127.0.0.1g k     spare k of group g (0-based), k < SPARE_NODES_PER_GROUP: 127.0.0.100..109 for
//!                  broker-a, 127.0.0.110.. for broker-b; Raft id replicas + 1 + k; gid 6000 + N
//!                  ports: remoting 10000+10·N+1, raft +2, admin +3 (N = last address byte)
//! <out>/nodes/<name>/broker.toml, disk/store/, <name>.log  (disk/: a tmpfs of its own under disk-full)
//! ```
//!
//! Spares are the nodes the `membership` nemesis adds to a group: none runs at the start, each is
//! used at most once (with its own id and an empty store), in order, so every id a group sees is
//! fresh and larger than every earlier one (a joining node must never be the smallest id of its
//! `raftPeers`, or it would initialise a group of its own).
//!
//! Invariants: addresses, ports and gids are distinct per process, spares included (the brokers bind
//! `0.0.0.0`, so ports must differ even though addresses do); a node's Raft id never changes across
//! restarts and no two nodes of a group share one.

use std::net::Ipv4Addr;
use std::path::Path;
use std::path::PathBuf;

/// `transactionTimeOut` written into every broker.toml: a half is checked once this old.
pub const TRANSACTION_TIME_OUT_MS: u64 = 2_000;
/// `transactionCheckInterval` written into every broker.toml.
pub const TRANSACTION_CHECK_INTERVAL_MS: u64 = 1_000;

/// The NameServer's port (RocketMQ's 9876).
pub const NAMESRV_PORT: u16 = 9876;
/// The cluster name every group registers under.
pub const CLUSTER_NAME: &str = "DefaultCluster";
/// CommitLog segment size of test nodes: small files keep dumps and `lose-unfsynced` cheap.
pub const COMMIT_LOG_SEGMENT_BYTES: u64 = 64 * 1024 * 1024;
/// Page-cache windows far below the defaults (1 GiB / 64 MiB), so that a run of a few tens of MB
/// drops synced CommitLog bytes all along and consumers, retries and the final drain read them back
/// from the files, under every nemesis.
pub const PAGE_CACHE_LEADER_WINDOW_BYTES: u64 = 8 * 1024 * 1024;
/// See [`PAGE_CACHE_LEADER_WINDOW_BYTES`].
pub const PAGE_CACHE_FOLLOWER_WINDOW_BYTES: u64 = 4 * 1024 * 1024;
/// Broker config key of the test-only unsafe mode (acknowledge before fsync) the self-test needs.
pub const UNSAFE_ACK_KEY: &str = "testOnlyUnsafeAckBeforeFsyncLosesData";
/// The broker's test-only key keeping queue locks in the leader's memory (the `order` self-test).
pub const UNSAFE_LOCAL_LOCKS_KEY: &str = "testOnlyLocalQueueLocksUnsafe";
/// Broker config key of the test-only injectable clock offset the `clock` nemesis drives.
pub const CLOCK_SKEW_KEY: &str = "testClockSkewFile";
/// Where the harness's clients connect from.
pub const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 1);
/// Spare nodes per group the `membership` nemesis can add (each used at most once); their last
/// address byte is `100 + 10·g + k`, so ten keep groups apart.
pub const SPARE_NODES_PER_GROUP: usize = 10;
const GID_BASE: u32 = 6000;
const SPARE_ADDRESS_BASE: usize = 100;

/// One broker replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSpec {
    /// `n11`, `n12`, ...
    pub name: String,
    /// Its group (`brokerName`).
    pub group: String,
    /// Raft id (1-based within the group; spares count on from `replicas + 1`).
    pub raft_id: u64,
    /// Its own address.
    pub ip: Ipv4Addr,
    /// Remoting port.
    pub listen_port: u16,
    /// Raft RPC port.
    pub raft_port: u16,
    /// Admin HTTP port.
    pub admin_port: u16,
    /// Group id its process runs with (the namespace rewrites its source address by it).
    pub gid: u32,
    /// Directory of its config, store and log.
    pub dir: PathBuf,
}

impl NodeSpec {
    /// `ip:listenPort`, as registered with the NameServer.
    pub fn remoting_addr(&self) -> String {
        format!("{}:{}", self.ip, self.listen_port)
    }

    /// `ip:raftPort`.
    pub fn raft_addr(&self) -> String {
        format!("{}:{}", self.ip, self.raft_port)
    }

    /// The folder holding the store: a size-limited tmpfs under `disk-full` ([`crate::disk`]).
    pub fn disk_dir(&self) -> PathBuf {
        self.dir.join("disk")
    }

    /// The store root (`storePathRootDir`), inside [`Self::disk_dir`].
    pub fn store_dir(&self) -> PathBuf {
        self.disk_dir().join("store")
    }

    /// The config file.
    pub fn config_path(&self) -> PathBuf {
        self.dir.join("broker.toml")
    }

    /// The log file (stdout and stderr of every incarnation).
    pub fn log_path(&self) -> PathBuf {
        self.dir.join(format!("{}.log", self.name))
    }

    /// The clock skew file the `clock` nemesis writes (`testClockSkewFile`; absent = no skew).
    pub fn clock_skew_path(&self) -> PathBuf {
        self.dir.join("clock-skew-ms")
    }
}

/// One NameServer. NameServers share nothing: every broker registers with each, every client may
/// ask any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamesrvSpec {
    /// `namesrv`, `namesrv2`.
    pub name: String,
    /// Its own address (port [`NAMESRV_PORT`]).
    pub ip: Ipv4Addr,
    /// Group id its process runs with.
    pub gid: u32,
    /// Its directory (log).
    pub dir: PathBuf,
}

impl NamesrvSpec {
    /// `ip:9876`.
    pub fn addr(&self) -> String {
        format!("{}:{NAMESRV_PORT}", self.ip)
    }
}

/// Most NameServers a run starts (their addresses must stay below the groups' `127.0.0.11`).
pub const NAMESRVS_MAX: usize = 8;

/// Every process of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// The NameServers, `127.0.0.2` first.
    pub namesrvs: Vec<NamesrvSpec>,
    /// Every initial broker replica, group by group.
    pub nodes: Vec<NodeSpec>,
    /// Every spare (not started until the `membership` nemesis adds it), group by group, in the
    /// order they are used.
    pub spares: Vec<NodeSpec>,
    /// Test-only unsafe acknowledgement (self-test).
    pub unsafe_ack_before_fsync: bool,
    /// Test-only queue locks in the leader's memory (the `order` self-test).
    pub unsafe_local_queue_locks: bool,
    /// Size of the tmpfs every node's `disk/` gets (`disk-full`); `None`: the results folder's disk.
    pub node_disk_bytes: Option<u64>,
}

/// NameServer `i` (0-based): `namesrv` at 127.0.0.2, `namesrv2` at 127.0.0.3, ...
fn namesrv_spec(root: &Path, i: usize) -> NamesrvSpec {
    let last = 2 + i as u8;
    let name = if i == 0 { "namesrv".to_owned() } else { format!("namesrv{}", i + 1) };
    NamesrvSpec {
        ip: Ipv4Addr::new(127, 0, 0, last),
        gid: GID_BASE + u32::from(last),
        dir: root.join("nodes").join(&name),
        name,
    }
}

/// The name of group `g` (0-based): `broker-a`, `broker-b`, ...
pub fn group_name(g: usize) -> String {
    let letter = char::from(b'a' + (g % 26) as u8);
    format!("broker-{letter}")
}

impl Layout {
    /// `groups` groups (1..=9) of `replicas` nodes (1..=9) under `root`, plus
    /// [`SPARE_NODES_PER_GROUP`] spares per group.
    pub fn new(root: &Path, groups: usize, replicas: usize, unsafe_ack_before_fsync: bool) -> Self {
        let groups = groups.clamp(1, 9);
        let replicas = replicas.clamp(1, 9);
        let spec = |g: usize, last: usize, raft_id: usize| {
            let last = u8::try_from(last).unwrap_or(u8::MAX);
            let base = 10_000 + 10 * u16::from(last);
            let name = format!("n{last}");
            NodeSpec {
                group: group_name(g),
                raft_id: raft_id as u64,
                ip: Ipv4Addr::new(127, 0, 0, last),
                listen_port: base + 1,
                raft_port: base + 2,
                admin_port: base + 3,
                gid: GID_BASE + u32::from(last),
                dir: root.join("nodes").join(&name),
                name,
            }
        };
        let mut nodes = Vec::new();
        let mut spares = Vec::new();
        for g in 0..groups {
            nodes.extend((1..=replicas).map(|r| spec(g, 10 * (g + 1) + r, r)));
            spares
                .extend((0..SPARE_NODES_PER_GROUP).map(|k| spec(g, SPARE_ADDRESS_BASE + 10 * g + k, replicas + 1 + k)));
        }
        Layout {
            namesrvs: vec![namesrv_spec(root, 0)],
            nodes,
            spares,
            unsafe_ack_before_fsync,
            unsafe_local_queue_locks: false,
            node_disk_bytes: None,
        }
    }

    /// `count` NameServers (1..=[`NAMESRVS_MAX`]) instead of one.
    pub fn with_namesrvs(mut self, root: &Path, count: usize) -> Self {
        self.namesrvs = (0..count.clamp(1, NAMESRVS_MAX)).map(|i| namesrv_spec(root, i)).collect();
        self
    }

    /// Every NameServer as RocketMQ's `namesrvAddr` lists them: `ip:9876;ip:9876`.
    pub fn namesrv_addr(&self) -> String {
        self.namesrvs.iter().map(NamesrvSpec::addr).collect::<Vec<_>>().join(";")
    }

    /// The NameServers' process names.
    pub fn namesrv_names(&self) -> Vec<String> {
        self.namesrvs.iter().map(|n| n.name.clone()).collect()
    }

    /// Whether `name` is a NameServer's process.
    pub fn is_namesrv(&self, name: &str) -> bool {
        self.namesrvs.iter().any(|n| n.name == name)
    }

    /// The group names, in order.
    pub fn groups(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for n in &self.nodes {
            if !out.contains(&n.group) {
                out.push(n.group.clone());
            }
        }
        out
    }

    /// The initial replicas of `group` (the running members are [`crate::db::Db::members`]).
    pub fn members(&self, group: &str) -> Vec<&NodeSpec> {
        self.nodes.iter().filter(|n| n.group == group).collect()
    }

    /// The spares of `group`, in the order they are used.
    pub fn spares(&self, group: &str) -> Vec<&NodeSpec> {
        self.spares.iter().filter(|n| n.group == group).collect()
    }

    /// Every node, initial replicas first, then spares.
    pub fn all_nodes(&self) -> impl Iterator<Item = &NodeSpec> {
        self.nodes.iter().chain(&self.spares)
    }

    /// The node (initial or spare) named `name`.
    pub fn node(&self, name: &str) -> Option<&NodeSpec> {
        self.all_nodes().find(|n| n.name == name)
    }

    /// The node (initial or spare) of `group` with Raft id `id`.
    pub fn node_by_id(&self, group: &str, id: u64) -> Option<&NodeSpec> {
        self.all_nodes().find(|n| n.group == group && n.raft_id == id)
    }

    /// The node (initial or spare) registered as `addr` (`ip:port`).
    pub fn node_by_addr(&self, addr: &str) -> Option<&NodeSpec> {
        self.all_nodes().find(|n| n.remoting_addr() == addr)
    }

    /// The `broker.toml` of initial replica `node` (RocketMQ's camelCase keys, `BrokerConfig`'s
    /// contract): `raftPeers` = the group's initial replicas.
    pub fn broker_toml(&self, node: &NodeSpec) -> String {
        self.toml_with_peers(node, &self.members(&node.group))
    }

    /// The `broker.toml` of `node` joining a group whose members are `members`: `raftPeers` = the
    /// members plus itself. `None` when `node` would be the smallest id of that list, because such
    /// a node initialises a group of its own instead of waiting to be added (docs/broker.md#group-membership,
    /// "Joining a group").
    pub fn joining_broker_toml(&self, node: &NodeSpec, members: &[&NodeSpec]) -> Option<String> {
        let mut peers: Vec<&NodeSpec> = members.iter().copied().filter(|m| m.raft_id != node.raft_id).collect();
        if peers.iter().all(|m| m.raft_id > node.raft_id) {
            return None;
        }
        peers.push(node);
        Some(self.toml_with_peers(node, &peers))
    }

    fn toml_with_peers(&self, node: &NodeSpec, peers: &[&NodeSpec]) -> String {
        let mut t = toml::Table::new();
        let s = |v: &str| toml::Value::String(v.to_owned());
        t.insert("brokerClusterName".into(), s(CLUSTER_NAME));
        t.insert("brokerName".into(), s(&node.group));
        t.insert("brokerIP1".into(), s(&node.ip.to_string()));
        t.insert("listenPort".into(), toml::Value::Integer(i64::from(node.listen_port)));
        t.insert("namesrvAddr".into(), s(&self.namesrv_addr()));
        t.insert("storePathRootDir".into(), s(&node.store_dir().to_string_lossy()));
        t.insert("mappedFileSizeCommitLog".into(), toml::Value::Integer(COMMIT_LOG_SEGMENT_BYTES as i64));
        t.insert("registerNameServerPeriod".into(), s("10s"));
        t.insert("raftPageCacheLeaderWindowBytes".into(), toml::Value::Integer(PAGE_CACHE_LEADER_WINDOW_BYTES as i64));
        t.insert(
            "raftPageCacheFollowerWindowBytes".into(),
            toml::Value::Integer(PAGE_CACHE_FOLLOWER_WINDOW_BYTES as i64),
        );
        t.insert("adminPort".into(), toml::Value::Integer(i64::from(node.admin_port)));
        t.insert("raftSelfId".into(), toml::Value::Integer(node.raft_id as i64));
        t.insert(CLOCK_SKEW_KEY.into(), s(&node.clock_skew_path().display().to_string()));
        // Unknown halves must be checked back and resolved within a run, not after RocketMQ's 6 s / 60 s.
        t.insert("transactionTimeOut".into(), s(&format!("{TRANSACTION_TIME_OUT_MS}ms")));
        t.insert("transactionCheckInterval".into(), s(&format!("{TRANSACTION_CHECK_INTERVAL_MS}ms")));
        if self.unsafe_ack_before_fsync {
            t.insert(UNSAFE_ACK_KEY.into(), toml::Value::Boolean(true));
        }
        if self.unsafe_local_queue_locks {
            t.insert(UNSAFE_LOCAL_LOCKS_KEY.into(), toml::Value::Boolean(true));
        }
        let peers = peers
            .iter()
            .map(|p| {
                let mut peer = toml::Table::new();
                peer.insert("id".into(), toml::Value::Integer(p.raft_id as i64));
                peer.insert("remotingAddr".into(), s(&p.remoting_addr()));
                peer.insert("raftAddr".into(), s(&p.raft_addr()));
                toml::Value::Table(peer)
            })
            .collect();
        t.insert("raftPeers".into(), toml::Value::Array(peers));
        toml::to_string(&t).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn two_groups_of_five_get_distinct_addresses_ports_and_gids() {
        let l = Layout::new(Path::new("/tmp/x"), 2, 5, false).with_namesrvs(Path::new("/tmp/x"), 2);
        assert_eq!((l.nodes.len(), l.spares.len()), (10, 2 * SPARE_NODES_PER_GROUP));
        assert_eq!(l.groups(), vec!["broker-a".to_owned(), "broker-b".to_owned()]);
        let all: Vec<&NodeSpec> = l.all_nodes().collect();
        let n = all.len();
        let ips: BTreeSet<_> = all.iter().map(|n| n.ip).chain(l.namesrvs.iter().map(|ns| ns.ip)).collect();
        let ports: BTreeSet<_> =
            all.iter().flat_map(|n| [n.listen_port, n.raft_port, n.admin_port]).chain([NAMESRV_PORT]).collect();
        let gids: BTreeSet<_> = all.iter().map(|n| n.gid).chain(l.namesrvs.iter().map(|ns| ns.gid)).collect();
        let names: BTreeSet<_> = all.iter().map(|n| n.name.as_str()).collect();
        assert_eq!((ips.len(), ports.len(), gids.len(), names.len()), (n + 2, 3 * n + 1, n + 2, n));
        assert_eq!(l.namesrv_addr(), "127.0.0.2:9876;127.0.0.3:9876");
        assert_eq!(l.namesrvs[1].name, "namesrv2");
        assert_eq!(l.nodes[0].remoting_addr(), "127.0.0.11:10111");
        assert_eq!(l.nodes[5].ip, Ipv4Addr::new(127, 0, 0, 21));
        assert_eq!(l.node_by_addr("127.0.0.22:10221").map(|n| n.name.as_str()), Some("n22"));
        for g in l.groups() {
            let ids: BTreeSet<u64> = all.iter().filter(|n| n.group == g).map(|n| n.raft_id).collect();
            assert_eq!(ids, (1..=(5 + SPARE_NODES_PER_GROUP) as u64).collect(), "{g}: ids count up, no reuse");
        }
    }

    #[test]
    fn spares_count_on_from_the_replicas_and_are_found_by_address_and_id() {
        let l = Layout::new(Path::new("/tmp/x"), 2, 3, false);
        let b = l.spares("broker-b");
        assert_eq!((b[0].name.as_str(), b[0].raft_id, b[0].remoting_addr()), ("n110", 4, "127.0.0.110:11101".into()));
        assert_eq!(l.spares("broker-a").last().map(|n| n.raft_id), Some(3 + SPARE_NODES_PER_GROUP as u64));
        assert_eq!(l.node_by_addr("127.0.0.110:11101").map(|n| n.group.as_str()), Some("broker-b"));
        assert_eq!(l.node_by_id("broker-a", 4).map(|n| n.name.as_str()), Some("n100"));
        assert_eq!(l.node("n12").map(|n| n.raft_id), Some(2));
        assert_eq!(l.members("broker-a").len(), 3, "spares are not initial members");
    }

    #[test]
    fn a_joining_node_lists_the_members_and_itself_and_is_never_the_smallest_id() -> anyhow::Result<()> {
        let l = Layout::new(Path::new("/tmp/x"), 1, 3, false);
        let spare = l.spares("broker-a")[0];
        let members: Vec<&NodeSpec> = l.members("broker-a").into_iter().skip(1).collect();
        let text = l.joining_broker_toml(spare, &members).expect("id 4 joins 2 and 3");
        let t: toml::Table = toml::from_str(&text)?;
        assert_eq!(t["raftSelfId"].as_integer(), Some(4));
        let ids: Vec<i64> = t["raftPeers"]
            .as_array()
            .map(|a| a.iter().filter_map(|p| p.get("id").and_then(toml::Value::as_integer)).collect())
            .unwrap_or_default();
        assert_eq!(ids, vec![2, 3, 4]);
        let first = l.members("broker-a")[0];
        assert_eq!(l.joining_broker_toml(first, &members), None, "id 1 would initialise a group of its own");
        assert_eq!(l.joining_broker_toml(spare, &[]), None, "alone it would initialise one too");
        Ok(())
    }

    #[test]
    fn broker_toml_names_the_whole_group_and_the_unsafe_key_only_when_asked() -> anyhow::Result<()> {
        let l = Layout::new(Path::new("/tmp/x"), 1, 3, false);
        let text = l.broker_toml(&l.nodes[1]);
        let t: toml::Table = toml::from_str(&text)?;
        assert_eq!(t["brokerName"].as_str(), Some("broker-a"));
        assert_eq!(t["raftSelfId"].as_integer(), Some(2));
        assert_eq!(t["brokerIP1"].as_str(), Some("127.0.0.12"));
        assert_eq!(t["namesrvAddr"].as_str(), Some("127.0.0.2:9876"));
        assert_eq!(t["raftPeers"].as_array().map(Vec::len), Some(3));
        assert!(!text.contains(UNSAFE_ACK_KEY));
        let unsafe_layout = Layout::new(Path::new("/tmp/x"), 1, 3, true);
        assert!(unsafe_layout.broker_toml(&unsafe_layout.nodes[0]).contains(UNSAFE_ACK_KEY));
        Ok(())
    }
}
