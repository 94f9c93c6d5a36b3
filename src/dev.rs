//! `raftmq dev`: a whole local cluster in one process, with no configuration — a NameServer and one
//! broker group of three Raft replicas on 127.0.0.1, data under `./raftmq-data` (or `--data`).
//!
//! Ports follow RocketMQ's conventions: NameServer 9876; broker `i` listens on `10911 + 10·i`
//! (10911, 10921, 10931, the spacing of rocketmq-docker's DLedger compose file) with its Raft port
//! at `40911 + i` (DLedger's sample peers) and its admin port at `8080 + i`. Restarting with the same
//! `--data` keeps every message: a broker never re-initialises a group that has state on disk.
//! Ctrl-C stops the brokers, then the NameServer, gracefully.
//!
//! The cluster makes its own cluster secret (`<data>/cluster.secret`, 32 random bytes as hex, mode
//! 0600, kept across restarts) and every member uses it, as a deployment beyond loopback must:
//! Raft RPCs and NameServer registrations are signed; `raftmq admin --clusterSecretFile` signs
//! the NameServer writes an operator sends.

use std::path::PathBuf;

use anyhow::Context;
use anyhow::Result;
use clap::Args;
use raftmq_broker::Broker;
use raftmq_broker::BrokerConfig;
use raftmq_broker::config::broker_config::RaftPeer;
use raftmq_namesrv::NameServer;
use raftmq_namesrv::NamesrvConfig;

/// `raftmq dev` flags.
#[derive(Debug, Args)]
pub struct DevArgs {
    /// Directory for the NameServer's KV config and every broker's store.
    #[arg(long, value_name = "DIR", default_value = "raftmq-data")]
    pub data: PathBuf,

    /// Replicas in the broker group: 1 (development without replication), 3 or 5.
    #[arg(long, default_value_t = 3, value_parser = parse_group_size)]
    pub nodes: u64,

    /// NameServer port.
    #[arg(long, default_value_t = 9876)]
    pub namesrv_port: u16,

    /// Remoting port of the first broker; broker `i` uses this + 10·i.
    #[arg(long, default_value_t = 10911)]
    pub broker_port: u16,

    /// Raft port of the first broker; broker `i` uses this + i.
    #[arg(long, default_value_t = 40911)]
    pub raft_port: u16,

    /// Admin HTTP port of the first broker; broker `i` uses this + i.
    #[arg(long, default_value_t = 8080)]
    pub admin_port: u16,

    /// The broker group's name (`brokerName`).
    #[arg(long, default_value = "broker-a")]
    pub broker_name: String,

    /// Check every request against this plain ACL file (RocketMQ's `plain_acl.yml`; `aclEnable`).
    #[arg(long, value_name = "FILE")]
    pub acl_file: Option<PathBuf>,

    /// The admin account of the ACL file the replicas sign their calls to each other with
    /// (`innerAccessKey`); needs `--inner-secret-key`.
    #[arg(long, value_name = "KEY", requires = "inner_secret_key")]
    pub inner_access_key: Option<String>,

    /// Secret of `--inner-access-key` (`innerSecretKey`).
    #[arg(
        long,
        value_name = "SECRET",
        env = "RAFTMQ_INNER_SECRET_KEY",
        hide_env_values = true,
        requires = "inner_access_key"
    )]
    pub inner_secret_key: Option<String>,

    /// Run without a cluster secret: Raft RPCs and NameServer registrations unauthenticated (the
    /// cluster is on loopback; for measuring what authentication costs).
    #[arg(long)]
    pub insecure_no_cluster_secret: bool,

    /// Override a broker config key on every replica, e.g. `-D raftCheckpointIntervalMs=0`;
    /// repeatable.
    #[arg(short = 'D', value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
}

fn parse_group_size(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(n @ (1 | 3 | 5)) => Ok(n),
        _ => Err(format!("{s:?}: a broker group has 1, 3 or 5 nodes")),
    }
}

/// The broker configs of the dev group (pure: tests check the layout without starting anything).
pub fn broker_configs(args: &DevArgs, namesrv_addr: &str) -> Result<Vec<BrokerConfig>> {
    let port = |base: u16, step: u64, i: u64| -> Result<u16> {
        u16::try_from(u64::from(base) + step * i).context("a port beyond 65535: choose lower base ports")
    };
    let mut peers = Vec::new();
    for i in 0..args.nodes {
        peers.push(RaftPeer {
            id: i,
            remoting_addr: format!("127.0.0.1:{}", port(args.broker_port, 10, i)?),
            raft_addr: format!("127.0.0.1:{}", port(args.raft_port, 1, i)?),
        });
    }
    let overrides = BrokerConfig::parse_overrides(args.overrides.iter().map(String::as_str))?;
    let mut configs = Vec::new();
    for i in 0..args.nodes {
        let config = BrokerConfig {
            broker_name: args.broker_name.clone(),
            broker_ip1: Some("127.0.0.1".to_owned()),
            listen_port: port(args.broker_port, 10, i)?,
            namesrv_addr: namesrv_addr.to_owned(),
            store_path_root_dir: args.data.join(&args.broker_name).join(format!("n{i}")),
            admin_port: port(args.admin_port, 1, i)?,
            raft_self_id: i,
            raft_peers: peers.clone(),
            // A development cluster serves every subscription a client may try (RocketMQ's
            // default is off; production configs opt in).
            enable_property_filter: true,
            acl_enable: args.acl_file.is_some(),
            acl_file: args.acl_file.clone(),
            inner_access_key: args.inner_access_key.clone(),
            inner_secret_key: args.inner_secret_key.clone(),
            cluster_secret_file: (!args.insecure_no_cluster_secret).then(|| cluster_secret_path(&args.data)),
            ..BrokerConfig::default()
        };
        configs.push(config.with_overrides(&overrides).with_context(|| format!("-D overrides for node {i}"))?);
    }
    Ok(configs)
}

/// Where the dev cluster keeps its cluster secret.
pub fn cluster_secret_path(data: &std::path::Path) -> PathBuf {
    data.join("cluster.secret")
}

/// Makes `path` hold a fresh random cluster secret (32 bytes from the OS, hex), owner-only,
/// unless it already holds one.
fn ensure_cluster_secret(path: &std::path::Path) -> Result<()> {
    use std::io::Read;
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if path.exists() {
        return Ok(());
    }
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .context("reading random bytes for the cluster secret")?;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    file.write_all(format!("{hex}\n").as_bytes()).with_context(|| format!("writing {}", path.display()))?;
    file.sync_all().with_context(|| format!("syncing {}", path.display()))?;
    Ok(())
}

/// Runs the dev cluster until the first shutdown signal.
pub async fn run(args: DevArgs) -> Result<()> {
    // Handlers first, so a signal during start-up still stops the cluster gracefully.
    let shutdown = crate::signal::shutdown();
    std::fs::create_dir_all(&args.data).with_context(|| format!("creating {}", args.data.display()))?;
    let secret_file = cluster_secret_path(&args.data);
    if !args.insecure_no_cluster_secret {
        ensure_cluster_secret(&secret_file)?;
    }
    let namesrv_config = NamesrvConfig {
        cluster_secret_file: if args.insecure_no_cluster_secret {
            String::new()
        } else {
            secret_file.display().to_string()
        },
        listen_port: args.namesrv_port,
        bind_address: "127.0.0.1".to_owned(),
        kv_config_path: args.data.join("namesrv").join("kvConfig.json").display().to_string(),
        ..NamesrvConfig::default()
    };
    let namesrv = NameServer::start(namesrv_config).await.context("starting the NameServer")?;
    let namesrv_addr = namesrv.local_addr().to_string();

    let configs = broker_configs(&args, &namesrv_addr)?;
    // All replicas start together: a group elects its first leader only once a majority is up.
    let started = futures::future::join_all(configs.iter().cloned().map(Broker::start)).await;
    let mut brokers = Vec::new();
    let mut failure = None;
    for (result, config) in started.into_iter().zip(&configs) {
        match result {
            Ok(broker) => brokers.push(broker),
            Err(e) => {
                failure = Some(anyhow::Error::new(e).context(format!("starting broker node {}", config.raft_self_id)))
            }
        }
    }
    if let Some(error) = failure {
        for broker in brokers {
            broker.shutdown().await;
        }
        namesrv.shutdown().await;
        return Err(error);
    }

    tokio::pin!(shutdown);
    // The banner promises a working cluster: print it once the group has a leader taking writes.
    let leader = tokio::select! {
        biased;
        _ = &mut shutdown => None,
        leader = ready_leader(&brokers) => Some(leader),
    };
    if let Some((node, term)) = leader {
        print_banner(&args, &namesrv_addr, &configs, node, term);
        shutdown.await;
    }
    for broker in brokers {
        broker.shutdown().await;
    }
    namesrv.shutdown().await;
    println!("raftmq dev stopped; data kept in {}", args.data.display());
    Ok(())
}

/// Waits until one replica leads and takes writes; its (node id, term). Logs while it waits, since
/// recovering a large store can take a while.
async fn ready_leader(brokers: &[Broker]) -> (u64, u64) {
    let started = std::time::Instant::now();
    let mut waiting_logged = false;
    loop {
        if let Some(b) = brokers.iter().find(|b| b.is_ready_leader()) {
            return (b.node_id(), b.leadership().term);
        }
        if !waiting_logged && started.elapsed() > DEV_LEADER_WAIT_NOTICE {
            println!("waiting for the broker group to elect a leader and catch up…");
            waiting_logged = true;
        }
        tokio::time::sleep(DEV_LEADER_POLL).await;
    }
}

/// How often start-up checks whether the group is ready.
const DEV_LEADER_POLL: std::time::Duration = std::time::Duration::from_millis(50);
/// When start-up says that it is still waiting for a leader.
const DEV_LEADER_WAIT_NOTICE: std::time::Duration = std::time::Duration::from_secs(3);

fn print_banner(args: &DevArgs, namesrv_addr: &str, configs: &[BrokerConfig], leader: u64, term: u64) {
    println!();
    println!(
        "raftmq dev cluster is up ({} replica(s) of {}, leader n{leader} in term {term}), data in {}",
        configs.len(),
        args.broker_name,
        args.data.display()
    );
    println!("  NameServer    {namesrv_addr}");
    for c in configs {
        println!(
            "  broker n{}     remoting 127.0.0.1:{}  raft {}  admin http://127.0.0.1:{}",
            c.raft_self_id,
            c.listen_port,
            c.self_peer().map_or("?", |p| p.raft_addr.as_str()),
            c.admin_port
        );
    }
    if args.insecure_no_cluster_secret {
        println!("  cluster secret none (--insecure-no-cluster-secret: Raft and registrations unauthenticated)");
    } else {
        let secret = cluster_secret_path(&args.data);
        println!(
            "  cluster secret {} (NameServer writes: raftmq admin --clusterSecretFile {})",
            secret.display(),
            secret.display()
        );
    }
    if let Some(file) = &args.acl_file {
        println!(
            "  plain ACL     {} (sign with --accessKey/--secretKey or RAFTMQ_ACCESS_KEY/RAFTMQ_SECRET_KEY)",
            file.display()
        );
    }
    println!();
    println!("Try it (another terminal):");
    println!("  raftmq admin updateTopic -n {namesrv_addr} -c DefaultCluster -t TopicTest");
    println!("  raftmq send -n {namesrv_addr} -t TopicTest --tag TagA --count 3 'hello raftmq'");
    println!("  raftmq consume -n {namesrv_addr} -t TopicTest -g demo-group --from-first --count 3");
    println!("  raftmq bench produce -n {namesrv_addr} -t TopicTest --count 10000");
    println!();
    println!("Ctrl-C stops the cluster; run `raftmq dev` again to continue with the same data.");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `raftmq dev`'s defaults (a 3-node group on RocketMQ's ports, data in `d`) with `overrides`.
    fn default_args(overrides: &[&str]) -> DevArgs {
        DevArgs {
            data: PathBuf::from("d"),
            nodes: 3,
            namesrv_port: 9876,
            broker_port: 10911,
            raft_port: 40911,
            admin_port: 8080,
            broker_name: "broker-a".into(),
            acl_file: None,
            inner_access_key: None,
            inner_secret_key: None,
            insecure_no_cluster_secret: false,
            overrides: overrides.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    #[test]
    fn dev_group_layout_follows_rocketmq_ports() {
        let args = default_args(&[]);
        let configs = broker_configs(&args, "127.0.0.1:9876").unwrap();
        assert_eq!(configs.iter().map(|c| c.listen_port).collect::<Vec<_>>(), [10911, 10921, 10931]);
        assert_eq!(configs.iter().map(|c| c.admin_port).collect::<Vec<_>>(), [8080, 8081, 8082]);
        assert_eq!(configs[2].raft_peers[2].raft_addr, "127.0.0.1:40913");
        assert_eq!(configs[1].store_path_root_dir, PathBuf::from("d/broker-a/n1"));
        for c in &configs {
            c.validate().expect("every dev config is valid");
        }
        assert!(configs.iter().all(|c| !c.acl_enable), "no ACL unless asked");
        assert!(configs.iter().all(|c| c.cluster_secret_file == Some(PathBuf::from("d/cluster.secret"))));
        let acl = DevArgs {
            acl_file: Some(PathBuf::from("acl.yml")),
            inner_access_key: Some("groupPeers".into()),
            inner_secret_key: Some("peer-secret".into()),
            ..args
        };
        for c in broker_configs(&acl, "127.0.0.1:9876").unwrap() {
            assert!(c.acl_enable && c.acl_file_path() == std::path::Path::new("acl.yml"));
            assert_eq!(c.inner_credentials().unwrap().map(|k| k.access_key().to_owned()), Some("groupPeers".into()));
        }
        assert!(parse_group_size("2").is_err());
    }

    #[test]
    fn dev_overrides_reach_every_replica_and_bad_ones_name_the_key() {
        let args = default_args;
        let configs =
            broker_configs(&args(&["raftCheckpointIntervalMs=0", "deleteWhen=4", "maxMessageSize=65536"]), "ns:9876")
                .unwrap();
        for c in &configs {
            assert_eq!(c.raft_checkpoint_interval_ms, 0);
            assert_eq!(c.delete_when, "4", "a text key keeps its text");
            assert_eq!(c.max_message_size, 65536);
        }
        assert_eq!(configs[2].listen_port, 10931, "the layout is kept");
        let unknown = broker_configs(&args(&["noSuchKey=1"]), "ns:9876").unwrap_err();
        assert!(format!("{unknown:#}").contains("noSuchKey"), "{unknown:#}");
        assert!(broker_configs(&args(&["novalue"]), "ns:9876").is_err());
        let invalid = broker_configs(&args(&["brokerName= "]), "ns:9876").unwrap_err();
        assert!(format!("{invalid:#}").contains("brokerName"), "{invalid:#}");
        assert_eq!(parse_group_size("1"), Ok(1));
    }

    #[test]
    fn the_dev_secret_is_made_once_owner_only_and_loadable() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = cluster_secret_path(dir.path());
        ensure_cluster_secret(&path).unwrap();
        let first = std::fs::read_to_string(&path).unwrap();
        assert_eq!(first.trim().len(), 64);
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        ensure_cluster_secret(&path).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), first, "kept across restarts");
        let loaded = raftmq_common::cluster_secret::ClusterSecret::from_config("", path.to_str().unwrap()).unwrap();
        assert!(loaded.is_some());
    }
}
