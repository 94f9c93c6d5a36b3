//! The cluster under test: where every process lives and how it is configured.
//!
//! ```text
//! 127.0.0.1        the harness's clients (producers, consumers, admin)
//! 127.0.0.2:9876   the NameServer                         gid 6002
//! 127.0.0.1g r     group g (broker-a, broker-b), replica r = 1..=5, e.g. 127.0.0.11..13   gid 60gr
//!                  ports: remoting 10000+10·N+1, raft +2, admin +3 (N = last address byte)
//! <out>/nodes/<name>/broker.toml, store/, <name>.log
//! ```
//!
//! Invariants: addresses, ports and gids are distinct per process (the brokers bind `0.0.0.0`, so
//! ports must differ even though addresses do); a node's Raft id never changes across restarts.

use std::net::Ipv4Addr;
use std::path::Path;
use std::path::PathBuf;

/// The NameServer's port (RocketMQ's 9876).
pub const NAMESRV_PORT: u16 = 9876;
/// The cluster name every group registers under.
pub const CLUSTER_NAME: &str = "DefaultCluster";
/// CommitLog segment size of test nodes: small files keep dumps and `lose-unfsynced` cheap.
pub const COMMIT_LOG_SEGMENT_BYTES: u64 = 64 * 1024 * 1024;
/// Broker config key of the test-only unsafe mode (acknowledge before fsync) the self-test needs.
pub const UNSAFE_ACK_KEY: &str = "unsafeAckBeforeFsync";
/// Broker config key of the test-only injectable clock offset the `clock` nemesis drives.
pub const CLOCK_SKEW_KEY: &str = "testClockSkewFile";
/// Where the harness's clients connect from.
pub const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 1);
const GID_BASE: u32 = 6000;

/// One broker replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSpec {
    /// `n11`, `n12`, ...
    pub name: String,
    /// Its group (`brokerName`).
    pub group: String,
    /// Raft id (1-based within the group).
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

    /// The store root (`storePathRootDir`).
    pub fn store_dir(&self) -> PathBuf {
        self.dir.join("store")
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

/// Every process of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// The NameServer's address.
    pub namesrv_ip: Ipv4Addr,
    /// The NameServer's gid.
    pub namesrv_gid: u32,
    /// The NameServer's directory (log).
    pub namesrv_dir: PathBuf,
    /// Every broker replica, group by group.
    pub nodes: Vec<NodeSpec>,
    /// Test-only unsafe acknowledgement (self-test).
    pub unsafe_ack_before_fsync: bool,
}

/// The name of group `g` (0-based): `broker-a`, `broker-b`, ...
pub fn group_name(g: usize) -> String {
    let letter = char::from(b'a' + (g % 26) as u8);
    format!("broker-{letter}")
}

impl Layout {
    /// `groups` groups (1..=9) of `replicas` nodes (1..=9) under `root`.
    pub fn new(root: &Path, groups: usize, replicas: usize, unsafe_ack_before_fsync: bool) -> Self {
        let groups = groups.clamp(1, 9);
        let replicas = replicas.clamp(1, 9);
        let mut nodes = Vec::new();
        for g in 0..groups {
            for r in 1..=replicas {
                let last = (10 * (g + 1) + r) as u8;
                let base = 10_000 + 10 * u16::from(last);
                let name = format!("n{last}");
                nodes.push(NodeSpec {
                    group: group_name(g),
                    raft_id: r as u64,
                    ip: Ipv4Addr::new(127, 0, 0, last),
                    listen_port: base + 1,
                    raft_port: base + 2,
                    admin_port: base + 3,
                    gid: GID_BASE + u32::from(last),
                    dir: root.join("nodes").join(&name),
                    name,
                });
            }
        }
        Layout {
            namesrv_ip: Ipv4Addr::new(127, 0, 0, 2),
            namesrv_gid: GID_BASE + 2,
            namesrv_dir: root.join("nodes").join("namesrv"),
            nodes,
            unsafe_ack_before_fsync,
        }
    }

    /// `ip:9876`.
    pub fn namesrv_addr(&self) -> String {
        format!("{}:{NAMESRV_PORT}", self.namesrv_ip)
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

    /// The replicas of `group`.
    pub fn members(&self, group: &str) -> Vec<&NodeSpec> {
        self.nodes.iter().filter(|n| n.group == group).collect()
    }

    /// The node registered as `addr` (`ip:port`).
    pub fn node_by_addr(&self, addr: &str) -> Option<&NodeSpec> {
        self.nodes.iter().find(|n| n.remoting_addr() == addr)
    }

    /// The `broker.toml` of `node` (RocketMQ's camelCase keys, `BrokerConfig`'s contract).
    pub fn broker_toml(&self, node: &NodeSpec) -> String {
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
        t.insert("adminPort".into(), toml::Value::Integer(i64::from(node.admin_port)));
        t.insert("raftSelfId".into(), toml::Value::Integer(node.raft_id as i64));
        t.insert(CLOCK_SKEW_KEY.into(), s(&node.clock_skew_path().display().to_string()));
        if self.unsafe_ack_before_fsync {
            t.insert(UNSAFE_ACK_KEY.into(), toml::Value::Boolean(true));
        }
        let peers = self
            .members(&node.group)
            .into_iter()
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
        let l = Layout::new(Path::new("/tmp/x"), 2, 5, false);
        assert_eq!(l.nodes.len(), 10);
        assert_eq!(l.groups(), vec!["broker-a".to_owned(), "broker-b".to_owned()]);
        let ips: BTreeSet<_> = l.nodes.iter().map(|n| n.ip).chain([l.namesrv_ip]).collect();
        let ports: BTreeSet<_> =
            l.nodes.iter().flat_map(|n| [n.listen_port, n.raft_port, n.admin_port]).chain([NAMESRV_PORT]).collect();
        let gids: BTreeSet<_> = l.nodes.iter().map(|n| n.gid).chain([l.namesrv_gid]).collect();
        assert_eq!((ips.len(), ports.len(), gids.len()), (11, 31, 11));
        assert_eq!(l.nodes[0].remoting_addr(), "127.0.0.11:10111");
        assert_eq!(l.nodes[5].ip, Ipv4Addr::new(127, 0, 0, 21));
        assert_eq!(l.node_by_addr("127.0.0.22:10221").map(|n| n.name.as_str()), Some("n22"));
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
